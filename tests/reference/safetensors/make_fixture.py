#!/usr/bin/env python3
"""Writes reference.safetensors with the `safetensors` project's own writer
(pip install safetensors; no numpy or torch needed): one tensor of each
dtype kiln has, a 0-d scalar, an empty tensor, and metadata. The values are
small integers and halves, exact in every dtype, so that the test states
them directly. tests/unit/frontend/serialization_test.cpp reads the file
this wrote (committed beside it); run this again only to change it."""
import ctypes
import os
import struct

import safetensors


def pack(fmt, values):
    return b"".join(struct.pack("<" + fmt, v) for v in values)


def bf16(values):
    # The top half of each f32 (exact for these values).
    return b"".join(struct.pack("<f", v)[2:] for v in values)


tensors = {
    "f32": {"dtype": "F32", "shape": [2, 3], "data": pack("f", [0.0, 1.5, -2.0, 3.25, 4.0, -0.5])},
    "f64": {"dtype": "F64", "shape": [3], "data": pack("d", [1.0, -1.0, 0.125])},
    "f16": {"dtype": "F16", "shape": [2, 2], "data": pack("e", [0.5, -1.5, 2.0, 1024.0])},
    "bf16": {"dtype": "BF16", "shape": [4], "data": bf16([1.0, -2.5, 0.75, 256.0])},
    "i32": {"dtype": "I32", "shape": [2, 1], "data": pack("i", [-7, 2147483647])},
    "i64": {"dtype": "I64", "shape": [2], "data": pack("q", [-(2**62), 9007199254740993])},
    "bool": {"dtype": "BOOL", "shape": [3], "data": bytes([1, 0, 1])},
    "scalar": {"dtype": "F32", "shape": [], "data": pack("f", [42.0])},
    "empty": {"dtype": "F32", "shape": [0, 4], "data": b""},
}
TORCH_NAMES = {"F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16",
               "I32": "int32", "I64": "int64", "BOOL": "bool"}


def serialize(tensors, metadata):
    """safetensors.serialize: dicts of dtype/shape/data before 0.8, TensorSpecs
    of a dtype, shape and raw buffer address from 0.8 on."""
    if not hasattr(safetensors, "TensorSpec"):
        return safetensors.serialize(tensors, metadata=metadata)
    keep = []  # the buffers stay alive through the call
    specs = {}
    for name, t in tensors.items():
        buf = ctypes.create_string_buffer(t["data"], max(len(t["data"]), 1))
        keep.append(buf)
        specs[name] = safetensors.TensorSpec(
            dtype=TORCH_NAMES[t["dtype"]], shape=t["shape"], data_ptr=ctypes.addressof(buf), data_len=len(t["data"]))
    return safetensors.serialize(specs, metadata=metadata)


out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.safetensors")
with open(out, "wb") as f:
    f.write(serialize(tensors, {"format": "pt", "written_by": "safetensors"}))
print(out)
