#!/usr/bin/env python3
"""Reads a safetensors file with the `safetensors` project's own reader and
prints one line per tensor, sorted by name: `name dtype shape hex-of-data`,
then `metadata key=value` lines, sorted; or exits 2 when safetensors is not
installed (tests/unit/frontend/serialization_test.cpp then skips, saying
why). Usage: describe.py FILE"""
import json
import struct
import sys

try:
    import safetensors
except ImportError as e:
    print(f"python's safetensors is not installed: {e}", file=sys.stderr)
    sys.exit(2)

data = open(sys.argv[1], "rb").read()
for name, t in sorted(safetensors.deserialize(data)):
    print(name, t["dtype"], "x".join(str(d) for d in t["shape"]) or "scalar", bytes(t["data"]).hex() or "-")
# The metadata, from the header itself (deserialize returns tensors only).

n = struct.unpack("<Q", data[:8])[0]
for k, v in sorted(json.loads(data[8 : 8 + n]).get("__metadata__", {}).items()):
    print("metadata", f"{k}={v}")
