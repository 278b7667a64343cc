#!/usr/bin/env python3
"""Writes tests/reference/functional/losses.json: what PyTorch's
cross_entropy, nll_loss and mse_loss compute, and their input gradients, on
fixed f32 inputs (tests/unit/frontend/losses_test.cpp reads it).

    /tmp/torchenv/bin/python tests/reference/make_loss_fixtures.py

Numbers are written as the shortest decimal that reads back as the same f32
(the f64 `repr` of an f32 value), integers as integers."""
import datetime
import json
import os
import platform

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "functional", "losses.json")


def values(t):
    return [float(v) for v in t.detach().reshape(-1).to(torch.float64).tolist()]


def tensor(t):
    if t is None:
        return None
    kind = "int" if not t.is_floating_point() else "float"
    data = [int(v) for v in t.reshape(-1).tolist()] if kind == "int" else values(t)
    return {"shape": list(t.shape), "kind": kind, "data": data}


def case(name, fn, x, target, weight=None, **kwargs):
    gen = torch.Generator().manual_seed(len(name) * 7919 + sum(map(ord, name)))
    x = x.detach().requires_grad_(True)
    out = fn(x, target, weight=weight, **kwargs) if fn is not F.mse_loss else fn(x, target, **kwargs)
    upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(torch.float32)
    (grad,) = torch.autograd.grad(out, [x], upstream)
    return {
        "name": name,
        "fn": fn.__name__,
        "kwargs": {k: v for k, v in kwargs.items()},
        "input": tensor(x),
        "target": tensor(target),
        "weight": tensor(weight),
        "output": tensor(out),
        "upstream": tensor(upstream),
        "grad_input": tensor(grad),
    }


def main():
    g = torch.Generator().manual_seed(20261129)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(torch.float32) * 2

    def classes(n, c, *more):
        return torch.randint(0, c, (n, *more), generator=g)

    t = classes(6, 5)
    t_ignored = t.clone()
    t_ignored[1] = -100
    t_ignored[4] = 2
    w = torch.rand(5, generator=g, dtype=torch.float64).to(torch.float32) + 0.5
    cases = [
        case("ce_mean", F.cross_entropy, randn(6, 5), t),
        case("ce_sum", F.cross_entropy, randn(6, 5), t, reduction="sum"),
        case("ce_none", F.cross_entropy, randn(6, 5), t, reduction="none"),
        case("ce_weight", F.cross_entropy, randn(6, 5), t, weight=w),
        case("ce_ignore", F.cross_entropy, randn(6, 5), t_ignored),
        case("ce_ignore_weight_none", F.cross_entropy, randn(6, 5), t_ignored, weight=w, reduction="none"),
        case("ce_smoothing", F.cross_entropy, randn(6, 5), t_ignored, label_smoothing=0.1),
        case("ce_3d", F.cross_entropy, randn(2, 4, 3), classes(2, 4, 3)),
        case("ce_1d", F.cross_entropy, randn(7), torch.tensor(3)),
        case("ce_probs", F.cross_entropy, randn(4, 3), torch.softmax(randn(4, 3), 1)),
        case("ce_large_logits", F.cross_entropy, randn(3, 4) * 40, classes(3, 4)),
        case("nll_mean", F.nll_loss, torch.log_softmax(randn(6, 5), 1), t),
        case("nll_weight_sum", F.nll_loss, randn(6, 5), t, weight=w, reduction="sum"),
        case("nll_ignore_index_3", F.nll_loss, randn(6, 5), t, ignore_index=3),
        case("mse_mean", F.mse_loss, randn(3, 4), randn(3, 4)),
        case("mse_sum", F.mse_loss, randn(3, 4), randn(3, 4), reduction="sum"),
        case("mse_none", F.mse_loss, randn(3, 4), randn(3, 4), reduction="none"),
    ]
    doc = {
        "format": 1,
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "date": datetime.date.today().isoformat(),
        "generator": "tests/reference/make_loss_fixtures.py",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
