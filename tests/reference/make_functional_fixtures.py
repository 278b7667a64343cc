#!/usr/bin/env python3
"""Writes tests/reference/functional/<group>.json: what PyTorch computes for
kiln's functions built from ops (reductions, softmax, layer_norm, clamp,
losses), and the gradients of their floating-point inputs for a fixed random
upstream gradient, in several dtypes. tests/unit/frontend/functional_reference_test.cpp
reads the files; tests never need Python.

    /tmp/torchenv/bin/python tests/reference/make_functional_fixtures.py [GROUP ...]

Format (one file per group):
  {"format": 1, "torch": ..., "cpu": ..., "date": ..., "generator": ...,
   "cases": [{"name", "fn", "dtype", "kwargs": {...},
              "inputs": [tensor...], "output": tensor,
              "upstream": tensor or null, "grads": [tensor or null per input]}]}
  tensor: {"shape": [...], "kind": "float"|"int", "data": [numbers]}
Floats are written as the f64 `repr` of their value, which is exact for
f32, f16 and bf16 values; no NaN or infinity appears."""
import datetime
import json
import os
import platform

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


def tensor(t):
    if t is None:
        return None
    if t.is_floating_point():
        return {"shape": list(t.shape), "kind": "float", "data": [float(v) for v in t.detach().double().reshape(-1).tolist()]}
    return {"shape": list(t.shape), "kind": "int", "data": [int(v) for v in t.reshape(-1).tolist()]}


FUNCTIONS = {
    "sum": lambda x, dims=None, keepdim=False: torch.sum(x) if dims is None else torch.sum(x, dims, keepdim),
    "mean": lambda x, dims=None, keepdim=False: torch.mean(x) if dims is None else torch.mean(x, dims, keepdim),
    "amax": lambda x, dims, keepdim=False: torch.amax(x, dims, keepdim),
    "amin": lambda x, dims, keepdim=False: torch.amin(x, dims, keepdim),
    "var": lambda x, dims, correction=1, keepdim=False: torch.var(x, dims, correction=correction, keepdim=keepdim),
    "argmax": lambda x, dim, keepdim=False: torch.argmax(x, dim, keepdim),
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "log_softmax": lambda x, dim: torch.log_softmax(x, dim),
    "layer_norm": lambda x, w=None, b=None, normalized_shape=None, eps=1e-5: F.layer_norm(x, normalized_shape, w, b, eps),
    "clamp": lambda x, min, max: torch.clamp(x, min, max),
    "where": lambda c, a, b: torch.where(c != 0, a, b),
    "cat": lambda a, b, dim: torch.cat([a, b], dim),
    "stack": lambda a, b, dim: torch.stack([a, b], dim),
    "slice": lambda x, dim, start, end, step: x[(slice(None),) * dim + (slice(start, end, step),)],
    "select": lambda x, dim, index: x.select(dim, index),
    "permute": lambda x, dims: x.permute(dims),
    "expand": lambda x, shape: x.expand(shape),
    "reshape": lambda x, shape: x.transpose(0, 1).reshape(shape),
    "cross_entropy": lambda x, t, w=None, **kw: F.cross_entropy(x, t, weight=w, **kw),
    "nll_loss": lambda x, t, w=None, **kw: F.nll_loss(x, t, weight=w, **kw),
    "mse_loss": lambda x, t, **kw: F.mse_loss(x, t, **kw),
    # Convolutional networks (docs/convolution.md).
    "conv2d": lambda x, w, b=None, **kw: F.conv2d(x, w, b, **kw),
    "conv_transpose2d": lambda x, w, b=None, **kw: F.conv_transpose2d(x, w, b, **kw),
    "max_pool2d": lambda x, **kw: F.max_pool2d(x, **kw),
    "avg_pool2d": lambda x, **kw: F.avg_pool2d(x, **kw),
    "adaptive_avg_pool2d": lambda x, output_size: F.adaptive_avg_pool2d(x, output_size),
    # Training mode on copies of the running statistics (which the case
    # does not record), or eval mode with the given ones.
    "batch_norm": lambda x, w, b, rm, rv, training, momentum=0.1, eps=1e-5: F.batch_norm(
        x, rm.clone(), rv.clone(), w, b, bool(training), momentum, eps),
    "group_norm": lambda x, w, b, num_groups, eps=1e-5: F.group_norm(x, num_groups, w, b, eps),
    "pad": lambda x, pads, mode="constant", value=0.0: F.pad(x, pads, mode, value) if mode == "constant" else F.pad(x, pads, mode),
    "interpolate": lambda x, size, mode, align_corners=None: F.interpolate(
        x, size=size, mode=mode, align_corners=None if align_corners is None else bool(align_corners)),
}


class Const:
    """An input that gets no gradient (a loss's class weights)."""

    def __init__(self, t):
        self.t = t


def case(name, fn, dtype, inputs, **kwargs):
    """inputs: f64 tensors (converted to dtype; they get gradients), Const
    f64 tensors (converted, no gradient) and integer tensors (class indices)."""
    tdtype = DTYPES[dtype]
    args, wants = [], []
    for x in inputs:
        want = x is not None and not isinstance(x, Const) and x.is_floating_point()
        if isinstance(x, Const):
            x = x.t.to(tdtype)
        elif want:
            x = x.to(tdtype).detach().requires_grad_(True)
        args.append(x)
        wants.append(want)
    out = FUNCTIONS[fn](*args, **kwargs)
    leaves = [a for a, want in zip(args, wants) if want]
    upstream, grads = None, [None] * len(args)
    if out.is_floating_point():
        gen = torch.Generator().manual_seed(sum(map(ord, name + dtype)) * 7919)
        upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(tdtype)
        it = iter(torch.autograd.grad(out, leaves, upstream, allow_unused=True))
        grads = [next(it) if want else None for want in wants]
    return {
        "name": name,
        "fn": fn,
        "dtype": dtype,
        "kwargs": {k: int(v) if isinstance(v, bool) else v for k, v in kwargs.items()},  # the reader has no booleans
        "inputs": [tensor(a) for a in args],
        "output": tensor(out),
        "upstream": tensor(upstream),
        "grads": [tensor(g) for g in grads],
    }


def groups():
    g = torch.Generator().manual_seed(20261129)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    def classes(c, *shape):
        return torch.randint(0, c, shape, generator=g)

    all_floats = ["f32", "f64", "f16", "bf16"]
    reductions, normalization, losses, movement = [], [], [], []
    for dt in all_floats:
        reductions += [
            case("sum_dim1", "sum", dt, [randn(3, 5, 4)], dims=[1]),
            case("sum_all", "sum", dt, [randn(4, 6)]),
            case("sum_keepdim_02", "sum", dt, [randn(3, 2, 5)], dims=[0, 2], keepdim=True),
            case("mean_dim0", "mean", dt, [randn(7, 3)], dims=[0]),
            case("mean_all", "mean", dt, [randn(2, 3, 4)]),
            case("amax_dim1", "amax", dt, [randn(4, 9)], dims=[1]),
            case("amin_keepdim", "amin", dt, [randn(5, 3)], dims=[0], keepdim=True),
            case("var_dim1", "var", dt, [randn(3, 8)], dims=[1]),
            case("var_biased_01", "var", dt, [randn(2, 3, 4)], dims=[0, 1], correction=0),
            case("argmax_dim1", "argmax", dt, [randn(4, 7)], dim=1),
        ]
        normalization += [
            case("softmax_last", "softmax", dt, [randn(4, 10, scale=3)], dim=-1),
            case("softmax_dim0", "softmax", dt, [randn(5, 3, scale=3)], dim=0),
            case("log_softmax_last", "log_softmax", dt, [randn(4, 10, scale=3)], dim=-1),
            case("log_softmax_large", "log_softmax", dt, [randn(3, 6, scale=30)], dim=1),
            case("layer_norm_affine", "layer_norm", dt, [randn(4, 16), randn(16), randn(16)], normalized_shape=[16]),
            case("layer_norm_plain_2d", "layer_norm", dt, [randn(2, 3, 5), None, None], normalized_shape=[3, 5]),
            case("layer_norm_offset", "layer_norm", dt, [randn(3, 32) + 5, randn(32), randn(32)], normalized_shape=[32], eps=1e-6),
            case("clamp", "clamp", dt, [randn(20)], min=-0.5, max=0.75),
        ]
    for dt in ["f32", "f64"]:
        movement += [
            case("where_broadcast", "where", dt, [classes(2, 3, 1), randn(3, 4), randn(4)]),
            case("cat_dim1", "cat", dt, [randn(2, 3), randn(2, 2)], dim=1),
            case("stack_dim2", "stack", dt, [randn(2, 3), randn(2, 3)], dim=2),
            case("slice_step3", "slice", dt, [randn(3, 11)], dim=1, start=1, end=10, step=3),
            case("select_dim0", "select", dt, [randn(4, 3)], dim=0, index=2),
            case("permute", "permute", dt, [randn(2, 3, 4)], dims=[2, 0, 1]),
            case("expand", "expand", dt, [randn(3, 1)], shape=[2, 3, 4]),
            case("reshape_of_transpose", "reshape", dt, [randn(3, 4)], shape=[6, 2]),
        ]
    t = classes(5, 6)
    t_ignored = t.clone()
    t_ignored[1] = -100
    w = torch.rand(5, generator=g, dtype=torch.float64) + 0.5
    for dt in ["f32", "f64"]:
        losses += [
            case("ce_mean", "cross_entropy", dt, [randn(6, 5, scale=2), t]),
            case("ce_sum", "cross_entropy", dt, [randn(6, 5, scale=2), t], reduction="sum"),
            case("ce_none", "cross_entropy", dt, [randn(6, 5, scale=2), t], reduction="none"),
            case("ce_weight", "cross_entropy", dt, [randn(6, 5, scale=2), t, Const(w)]),
            case("ce_ignore", "cross_entropy", dt, [randn(6, 5, scale=2), t_ignored]),
            case("ce_ignore_weight_none", "cross_entropy", dt, [randn(6, 5, scale=2), t_ignored, Const(w)], reduction="none"),
            case("ce_smoothing", "cross_entropy", dt, [randn(6, 5, scale=2), t_ignored], label_smoothing=0.1),
            case("ce_3d", "cross_entropy", dt, [randn(2, 4, 3, scale=2), classes(4, 2, 3)]),
            case("ce_1d", "cross_entropy", dt, [randn(7, scale=2), torch.tensor(3)]),
            case("ce_probs", "cross_entropy", dt, [randn(4, 3, scale=2), torch.softmax(randn(4, 3), 1)]),
            case("ce_large_logits", "cross_entropy", dt, [randn(3, 4, scale=80), classes(4, 3)]),
            case("nll_mean", "nll_loss", dt, [torch.log_softmax(randn(6, 5), 1), t]),
            case("nll_weight_sum", "nll_loss", dt, [randn(6, 5), t, Const(w)], reduction="sum"),
            case("nll_ignore_index_3", "nll_loss", dt, [randn(6, 5), t], ignore_index=3),
            case("mse_mean", "mse_loss", dt, [randn(3, 4), randn(3, 4)]),
            case("mse_sum", "mse_loss", dt, [randn(3, 4), randn(3, 4)], reduction="sum"),
            case("mse_none_broadcast", "mse_loss", dt, [randn(3, 4), randn(4)], reduction="none"),
        ]
    convolution = []
    for dt in ["f32", "f64"]:
        convolution += [
            case("conv2d_bias_pad1", "conv2d", dt, [randn(2, 3, 7, 6), randn(4, 3, 3, 3), randn(4)], padding=1),
            case("conv2d_stride2_dilation", "conv2d", dt, [randn(1, 4, 9, 10), randn(6, 2, 3, 2)], stride=2, padding=2,
                 dilation=[2, 1], groups=2),
            case("conv2d_depthwise", "conv2d", dt, [randn(2, 4, 6, 6), randn(4, 1, 3, 3)], padding=1, groups=4),
            case("conv2d_same_even", "conv2d", dt, [randn(1, 2, 5, 6), randn(3, 2, 4, 2)], padding="same"),
            case("conv2d_floor", "conv2d", dt, [randn(1, 2, 9, 9), randn(2, 2, 2, 2)], stride=3),
            case("conv_transpose2d", "conv_transpose2d", dt, [randn(2, 4, 3, 4), randn(4, 3, 3, 2), randn(6)], stride=2,
                 padding=1, output_padding=1, groups=2),
            case("max_pool2d_3s2p1", "max_pool2d", dt, [randn(2, 3, 9, 8)], kernel_size=3, stride=2, padding=1),
            case("max_pool2d_ceil_dilation", "max_pool2d", dt, [randn(1, 2, 10, 9)], kernel_size=2, stride=3,
                 dilation=2, ceil_mode=True),
            case("avg_pool2d_pad_exclude", "avg_pool2d", dt, [randn(2, 2, 7, 7)], kernel_size=3, stride=2, padding=1,
                 count_include_pad=False),
            case("avg_pool2d_ceil_divisor", "avg_pool2d", dt, [randn(1, 3, 8, 7)], kernel_size=[3, 2], stride=2,
                 ceil_mode=True, divisor_override=5),
            case("adaptive_avg_pool2d_1", "adaptive_avg_pool2d", dt, [randn(2, 5, 7, 7)], output_size=[1, 1]),
            case("adaptive_avg_pool2d_uneven", "adaptive_avg_pool2d", dt, [randn(1, 2, 7, 10)], output_size=[3, 4]),
            case("batch_norm_train", "batch_norm", dt, [randn(4, 3, 5, 5) + 2, randn(3), randn(3), Const(randn(3)),
                                                        Const(randn(3).abs() + 0.5)], training=1),
            case("batch_norm_eval", "batch_norm", dt, [randn(2, 3, 4, 4), randn(3), randn(3), Const(randn(3)),
                                                       Const(randn(3).abs() + 0.5)], training=0),
            case("group_norm", "group_norm", dt, [randn(2, 6, 3, 4), randn(6), randn(6)], num_groups=3),
            case("pad_constant", "pad", dt, [randn(1, 2, 3, 4)], pads=[1, 2, 0, 1], value=0.5),
            case("pad_reflect", "pad", dt, [randn(1, 2, 4, 5)], pads=[2, 1, 1, 3], mode="reflect"),
            case("pad_replicate", "pad", dt, [randn(1, 2, 3, 3)], pads=[2, 2, 1, 0], mode="replicate"),
            case("pad_circular", "pad", dt, [randn(1, 1, 3, 4)], pads=[1, 3, 2, 1], mode="circular"),
            case("interpolate_nearest", "interpolate", dt, [randn(1, 2, 3, 5)], size=[7, 4], mode="nearest"),
            case("interpolate_bilinear", "interpolate", dt, [randn(2, 1, 4, 3)], size=[7, 8], mode="bilinear",
                 align_corners=False),
            case("interpolate_bilinear_corners", "interpolate", dt, [randn(1, 2, 3, 4)], size=[5, 9],
                 mode="bilinear", align_corners=True),
        ]
    return {"reductions": reductions, "normalization": normalization, "losses": losses, "movement": movement,
            "convolution": convolution}


def main():
    import warnings

    import sys

    warnings.filterwarnings("ignore")  # mse_loss warns about broadcasting, as intended here
    only = set(sys.argv[1:])  # group names; none: every group
    for group, cases in groups().items():
        if only and group not in only:
            continue
        doc = {
            "format": 1,
            "torch": torch.__version__,
            "cpu": platform.processor() or platform.machine(),
            "date": datetime.date.today().isoformat(),
            "generator": "tests/reference/make_functional_fixtures.py",
            "cases": cases,
        }
        path = os.path.join(HERE, "functional", group + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # One case a line, so that a diff shows which case moved.
        head = json.dumps({k: v for k, v in doc.items() if k != "cases"})[:-1]
        with open(path, "w") as f:
            f.write(head + ', "cases": [\n' + ",\n".join(json.dumps(c) for c in cases) + "\n]}\n")
        print("wrote", path, len(cases), "cases")


if __name__ == "__main__":
    main()
