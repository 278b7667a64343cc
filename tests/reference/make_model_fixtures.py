#!/usr/bin/env python3
"""Writes tests/reference/models/resnet18.json: torchvision's ResNet-18
(eval mode) on a fixed input with fixed weights, so that
tests/e2e/resnet_reference_test.cpp can check kiln's ResNet-18
(tools/common/resnet.h) against PyTorch without Python.

The weights are not stored (46 MB): both sides compute them from one
formula over the state dict in torchvision's order (Note [Formula weights]
in the test), and the fixture holds the state dict's names and shapes, the
input's shape and the logits.

    /tmp/torchenv/bin/python tests/reference/make_model_fixtures.py

Needs torch and torchvision (pip install torch torchvision).
"""
import datetime
import json
import math
import os
import platform

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def formula(k, name, shape):
    """Element i of state-dict entry k (named `name`, of `shape`), in f64."""
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    s = torch.sin(i * 0.37 + k * 1.7)
    if name.endswith("running_var"):
        v = 1.0 + 0.25 * (s + 1.0)
    elif name.endswith("running_mean") or name.endswith("bias"):
        v = 0.1 * s
    elif len(shape) == 1:  # batch norm weights
        v = 1.0 + 0.1 * s
    else:  # convolution and linear weights: about unit variance of the outputs
        fan_in = math.prod(shape[1:])
        v = s * math.sqrt(3.0 / fan_in)
    return v.reshape(shape)


def main():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    state = model.state_dict()
    entries = []
    new_state = {}
    for k, (name, t) in enumerate(state.items()):
        entries.append({"name": name, "shape": list(t.shape)})
        if t.dtype == torch.int64:  # num_batches_tracked
            new_state[name] = torch.zeros_like(t)
        else:
            new_state[name] = formula(k, name, list(t.shape)).to(t.dtype)
    model.load_state_dict(new_state)
    shape = [2, 3, 64, 64]
    x = torch.sin(torch.arange(math.prod(shape), dtype=torch.float64) * 0.013).reshape(shape).float()
    torch.set_num_threads(2)
    with torch.no_grad():
        y = model(x)
    doc = {
        "format": 1,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cpu": platform.processor() or platform.machine(),
        "date": datetime.date.today().isoformat(),
        "generator": "tests/reference/make_model_fixtures.py",
        "model": "resnet18",
        "state_dict": entries,
        "input_shape": shape,
        "logits": {"shape": list(y.shape), "data": [float(v) for v in y.double().reshape(-1).tolist()]},
    }
    path = os.path.join(HERE, "models", "resnet18.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    print("wrote", path, "logits", list(y.shape), "range", float(y.min()), float(y.max()))


if __name__ == "__main__":
    main()
