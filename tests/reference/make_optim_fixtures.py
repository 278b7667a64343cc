#!/usr/bin/env python3
"""Writes tests/reference/optim/{optimizers,schedulers}.json: what
torch.optim's SGD, Adam and AdamW and its learning-rate schedulers do.

tests/unit/frontend/optim_reference_test.cpp reads the committed files and
runs kiln's optimizers on the same parameters with the same gradients, and
kiln's schedulers with the same settings; neither the tests nor CI need
Python. Run this (`/tmp/torchenv/bin/python
tests/reference/make_optim_fixtures.py`, see README.md here) only to
regenerate the files. The inputs are seeded, so a rerun with the same
PyTorch on the same kind of CPU rewrites the same bytes except the date.

optimizers.json: per case, the optimizer and its options, the parameter
groups, the initial parameters, and for each step the gradients set before
optimizer.step() (null: no gradient, PyTorch skips the parameter) and the
parameters after it; at the end, each parameter's state (momentum buffer;
Adam's step, exp_avg, exp_avg_sq, max_exp_avg_sq). Tensors are f32 in the
format of fixtures/*.json (README.md): bits in hex and a decimal.
Optimizers run with foreach=False, PyTorch's single-tensor path (the one it
takes for CPU tensors anyway), which kiln follows.

schedulers.json: per case, the scheduler and its options, the base lr, and
get_last_lr()[0] after construction and after each of `steps` steps, as
Python floats (JSON numbers that read back exactly).
"""

import datetime
import os
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import cpu_model, dump, tensor_json  # noqa: E402 (also imports torch, or says how to get it)

import torch  # noqa: E402

FORMAT = 1
STEPS = 6
SHAPES = ([2, 10], [3])  # 20 elements (a 16-lane vector body and a tail) and 3 (a tail only)

# name: (optimizer, options, groups, gradient plan). groups: None for one
# group of all parameters, else a list of (parameter indices, overrides).
# The plan maps a step to the parameters without a gradient at that step,
# and optionally scales: step -> factor for the gradients (amsgrad needs the
# second moment to fall, so that the max differs from it).
CASES = {
    "sgd": ("SGD", {"lr": 0.1}, None, {}),
    "sgd_weight_decay": ("SGD", {"lr": 0.1, "weight_decay": 0.01}, None, {}),
    "sgd_momentum": ("SGD", {"lr": 0.1, "momentum": 0.9}, None, {}),
    "sgd_momentum_dampening_weight_decay": (
        "SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.5, "weight_decay": 0.01}, None, {}),
    "sgd_nesterov": ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001}, None, {}),
    "sgd_groups": ("SGD", {"lr": 0.1, "momentum": 0.5},
                   [([0], {}), ([1], {"lr": 0.01, "weight_decay": 0.1})], {}),
    "sgd_missing_grad": ("SGD", {"lr": 0.1, "momentum": 0.9}, None, {"skip": {1: [1], 3: [0, 1]}}),
    "adam": ("Adam", {"lr": 0.01}, None, {}),
    "adam_weight_decay": ("Adam", {"lr": 0.01, "weight_decay": 0.1}, None, {}),
    "adam_amsgrad": ("Adam", {"lr": 0.01, "weight_decay": 0.01, "amsgrad": True}, None,
                     {"scale": {2: 3.0, 4: 0.1, 5: 0.01}}),
    "adam_betas": ("Adam", {"lr": 0.02, "betas": (0.3, 0.9), "eps": 1e-6}, None, {}),
    "adam_groups": ("Adam", {"lr": 0.01}, [([0], {"weight_decay": 0.05}), ([1], {"lr": 0.1})], {}),
    "adam_missing_grad": ("Adam", {"lr": 0.01}, None, {"skip": {0: [1], 2: [1], 3: [0]}}),
    "adamw": ("AdamW", {"lr": 0.01}, None, {}),
    "adamw_weight_decay_amsgrad": ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}, None,
                                   {"scale": {2: 3.0, 4: 0.1, 5: 0.01}}),
}

# name: (scheduler, options, base lr, steps).
SCHEDULERS = {
    "step_lr": ("StepLR", {"step_size": 3, "gamma": 0.5}, 0.1, 12),
    "step_lr_default_gamma": ("StepLR", {"step_size": 1}, 1.0, 5),
    "cosine": ("CosineAnnealingLR", {"T_max": 10}, 0.1, 25),
    "cosine_eta_min": ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}, 0.05, 20),
    "linear_warmup": ("LinearLR", {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 4}, 0.01, 8),
    "linear_decay": ("LinearLR", {"start_factor": 1.0, "end_factor": 0.25, "total_iters": 5}, 0.2, 8),
}


def f32(t):
    return t.to(torch.float32)


def optimizer_case(name, spec):
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    opt_name, options, groups, plan = spec
    params = [f32(torch.randn(s, generator=gen, dtype=torch.float64)).requires_grad_() for s in SHAPES]
    initial = [tensor_json(p, "f32") for p in params]
    if groups is None:
        param_groups = [{"params": params}]
        groups_json = [{"params": list(range(len(params)))}]
    else:
        param_groups = [dict({"params": [params[i] for i in idx]}, **over) for idx, over in groups]
        groups_json = [dict({"params": idx}, **over) for idx, over in groups]
    opt = getattr(torch.optim, opt_name)(param_groups, foreach=False, **options)
    steps = []
    for step in range(STEPS):
        grads = []
        scale = plan.get("scale", {}).get(step, 1.0)
        for i, p in enumerate(params):
            g = f32(torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale)
            if i in plan.get("skip", {}).get(step, []):
                p.grad = None
                grads.append(None)
            else:
                p.grad = g
                grads.append(tensor_json(g, "f32"))
        opt.step()
        steps.append({"grads": grads, "params": [tensor_json(p, "f32") for p in params]})
    state = []
    for p in params:
        s = opt.state.get(p, {})
        entry = {}
        if "momentum_buffer" in s and s["momentum_buffer"] is not None:
            entry["momentum_buffer"] = tensor_json(s["momentum_buffer"], "f32")
        if "step" in s:
            entry["step"] = int(s["step"].item())
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                if key in s:
                    entry[key] = tensor_json(s[key], "f32")
        state.append(entry)
    # Booleans as 0/1: the tests' JSON reader takes no true/false.
    opts = {k: int(v) if isinstance(v, bool) else v for k, v in options.items()}
    if "betas" in opts:
        opts["betas"] = list(opts["betas"])
    return {"name": name, "optimizer": opt_name, "options": opts, "groups": groups_json, "params": initial,
            "steps": steps, "state": state}


def scheduler_case(name, spec):
    sched_name, options, base_lr, steps = spec
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = getattr(torch.optim.lr_scheduler, sched_name)(opt, **options)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return {"name": name, "scheduler": sched_name, "options": options, "base_lr": base_lr, "lrs": lrs}


def header():
    return {
        "format": FORMAT,
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": cpu_model(),
        "date": datetime.date.today().isoformat(),
        "generator": "tests/reference/make_optim_fixtures.py",
    }


def main():
    torch.set_num_threads(1)
    out = os.path.join(HERE, "optim")
    os.makedirs(out, exist_ok=True)
    docs = {
        "optimizers": dict(header(), cases=[optimizer_case(n, s) for n, s in CASES.items()]),
        "schedulers": dict(header(), cases=[scheduler_case(n, s) for n, s in SCHEDULERS.items()]),
    }
    for name, doc in docs.items():
        path = os.path.join(out, name + ".json")
        with open(path, "w") as f:
            f.write(dump(doc) + "\n")
        print("%s: %d cases, %d bytes" % (path, len(doc["cases"]), os.path.getsize(path)))


if __name__ == "__main__":
    main()
