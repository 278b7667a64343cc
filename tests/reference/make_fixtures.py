#!/usr/bin/env python3
"""Writes tests/reference/fixtures/<op>.json: PyTorch's results for kiln's ops.

tests/unit/frontend/reference_test.cpp runs kiln on the same inputs and
compares; it reads only the committed JSON files, so neither the tests nor CI
need Python or torch. Run this (`pip install torch && python3
tests/reference/make_fixtures.py`) only to regenerate the files, or after
adding an op to OPS below; the inputs are seeded, so a rerun with the same
PyTorch on the same kind of CPU rewrites the same bytes except the date.
Each case also holds PyTorch's gradients (`grads`) for a fixed random upstream
gradient, for the autograd tests to come. The format is in README.md here.
"""

import argparse
import datetime
import json
import math
import os
import platform
import struct
import sys
import warnings
import zlib

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
except ImportError:
    sys.exit("make_fixtures.py needs PyTorch: pip install torch (see tests/reference/README.md)")

FORMAT = 1
HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f32": torch.float32, "f64": torch.float64}  # f16/bf16: add here and in bits() below

F32_MAX = 3.4028234663852886e38
F32_MIN_NORMAL = 1.1754943508222875e-38
F32_MIN_DENORMAL = 1.401298464324817e-45

# Values every op sees in its "special" case: zeros of both signs,
# infinities, NaN, denormals (the smallest, a middle one, the largest), the
# smallest normal, the largest finite magnitudes, and a few plain numbers.
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, F32_MIN_DENORMAL, -F32_MIN_DENORMAL, 1e-40, -1e-40,
           1.1754942106924411e-38, F32_MIN_NORMAL, -F32_MIN_NORMAL, F32_MAX, -F32_MAX, 1.0, -1.0, 0.5, -0.5, 2.0,
           -3.0, 1e-20, 1e20]

# Added to SPECIAL for f64 cases: the ends of f64's range and exp's thresholds there.
SPECIAL_F64 = [1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310,
               1e300, -1e300, 709.78, 709.79, -745.1, -746.0]

# The operands of the binary ops' special case, paired all with all
# ([13,1] against [1,13]): inf - inf, 0 * inf, 0 / 0, -0 + 0, overflow,
# denormal results, NaN on either side.
SPECIAL_PAIRS = [0.0, -0.0, 1.0, -2.5, 3.0, math.inf, -math.inf, math.nan, F32_MIN_DENORMAL, -1e-40,
                 1.5e-38, F32_MAX, -F32_MAX]


def unary(fn, expr, make_input, extra, sweep):
    """An op of one tensor. make_input(randn) maps standard normal samples into
    the op's domain; extra: values around the op's interesting points, added
    to SPECIAL; sweep: (kind, lo, hi) for a 256-point linear or log sweep."""
    return {"arity": 1, "fn": fn, "expr": expr, "make_input": make_input, "extra": extra, "sweep": sweep}


def binary(fn, expr, scalar_as_tensor=()):
    """An op of two operands. scalar_as_tensor: the sides ("a", "b") where a
    scalar operand is passed to PyTorch as a 0-d tensor of the op's dtype
    (which is what kiln makes of a C++ number) rather than a Python number:
    where PyTorch takes no number (torch.maximum), and for `2.5 / x`, which
    Python computes as x.reciprocal() * 2.5 (two roundings) while libtorch's
    C++ `2.5 / x` fills a tensor with 2.5 and divides, as kiln does."""
    return {"arity": 2, "fn": fn, "expr": expr, "scalar_as_tensor": scalar_as_tensor}


ident = lambda r: r  # noqa: E731
F = torch.nn.functional
# Points sin and cos must reduce well: near multiples of pi/2, large arguments
# (16367173 * 2^72 is the f32 closest to a multiple of pi/2 in its binade),
# and pi rounded to f32.
TRIG = [3.1415927, -3.1415927, 1.5707964, 4.712389, 6.2831855, 1e4, -1e4, 1e6, 1e9, 7.7272e28, 16367173 * 2.0**72,
        1e-4, 0.7853982, 0.78539819, 100.0, -355.0]
# erf and gelu: erf's switch at |x| = 1, its saturation, gelu's left tail.
ERF = [1.0, -1.0, 0.99999994, 1.0000001, 0.5, 2.0, -2.0, 3.9, 4.0, 6.0, -6.0, 10.0, 1e-4, -1e-4]
GELU = [-5.0, -8.0, -10.0, -13.0, -20.0, -30.0, 1.4142135, -1.4142135, 1.4142137, 5.0, 10.0, 1e-4, -1e-4, 0.5]
# softplus: kiln's log1p switch (exp(x) = sqrt(2) - 1 near x = -0.8814), the threshold (x beta = 20), the left
# tail where log(1 + exp) would lose everything, f32 exp's flush point (-87.34) and PyTorch's last subnormal.
SOFTPLUS = [-0.8813736, -0.88137, 19.999998, 20.0, 20.000002, 25.0, 40.0, -20.0, -50.0, -87.3, -88.0, -100.0, -103.9,
            -700.0, -744.0, 1e-4, -1e-4]

# One entry per op: adding an op to kiln adds a line here (and a line to the
# tolerance table of reference_test.cpp).
OPS = {
    "add": binary(lambda a, b: a + b, "{a} + {b}"),
    "sub": binary(lambda a, b: a - b, "{a} - {b}"),
    "mul": binary(lambda a, b: a * b, "{a} * {b}"),
    "div": binary(lambda a, b: a / b, "{a} / {b}", scalar_as_tensor=("a",)),
    "maximum": binary(torch.maximum, "torch.maximum({a}, {b})", scalar_as_tensor=("a", "b")),
    "minimum": binary(torch.minimum, "torch.minimum({a}, {b})", scalar_as_tensor=("a", "b")),
    "neg": unary(torch.neg, "-{x}", ident, [], None),
    "relu": unary(torch.relu, "torch.relu({x})", ident, [], None),
    "exp": unary(torch.exp, "torch.exp({x})", lambda r: r * 4,
                 # 2^-126 (kiln's flush point), ln 2, overflow at 88.7228, PyTorch's last denormal near -103.97
                 [1e-8, -1e-8, 0.6931472, 10.0, -10.0, 20.0, 88.72283, 88.7228394, 88.8, -87.33, -87.3366, -88.0,
                  -100.0, -103.9, -104.0, -150.0], ("lin", -105.0, 89.0)),
    "log": unary(torch.log, "torch.log({x})", lambda r: torch.exp(2 * r),
                 [1.0000001, 0.99999994, 0.99, 1.01, 0.70710677, 0.7071068, 1.4142135, 2.7182817, 1e-30, 1e30, 3.0,
                  10.0], ("log", 1e-44, 3e38)),
    "sqrt": unary(torch.sqrt, "torch.sqrt({x})", lambda r: torch.exp(2 * r), [4.0, 9.0, 1e-30, 1e30, 0.25],
                  ("log", 1e-44, 3e38)),
    "tanh": unary(torch.tanh, "torch.tanh({x})", lambda r: r * 2,
                  # kiln switches formulas at |x| = 0.625; tanh saturates to 1 near 9.01
                  [0.62499994, 0.625, 0.62500006, -0.625, 1e-4, -1e-4, 0.5493061, 0.01, 9.0, 9.1, 20.0, -20.0],
                  ("lin", -10.0, 10.0)),
    "sigmoid": unary(torch.sigmoid, "torch.sigmoid({x})", lambda r: r * 4,
                     [1e-8, 15.0, -15.0, 17.0, -17.0, 30.0, -30.0, 88.0, -88.0, -88.7, -89.0, -100.0, -104.0],
                     ("lin", -110.0, 100.0)),
    "pow": binary(torch.pow, "torch.pow({a}, {b})", scalar_as_tensor=("a",)),
    "abs": unary(torch.abs, "torch.abs({x})", ident, [], None),
    "rsqrt": unary(torch.rsqrt, "torch.rsqrt({x})", lambda r: torch.exp(2 * r), [4.0, 0.25, 1e-30, 1e30, 3.0, 1e-44],
                   ("log", 1e-44, 3e38)),
    "sin": unary(torch.sin, "torch.sin({x})", lambda r: r * 4, TRIG, ("lin", -30.0, 30.0)),
    "cos": unary(torch.cos, "torch.cos({x})", lambda r: r * 4, TRIG, ("lin", -30.0, 30.0)),
    "erf": unary(torch.erf, "torch.erf({x})", lambda r: r * 2, ERF, ("lin", -6.0, 6.0)),
    "silu": unary(F.silu, "torch.nn.functional.silu({x})", lambda r: r * 4,
                  [1e-8, 15.0, -15.0, 17.0, -17.0, 30.0, -30.0, 88.0, -88.0, -88.7, -89.0, -100.0, -104.0],
                  ("lin", -110.0, 100.0)),
    "gelu": unary(F.gelu, "torch.nn.functional.gelu({x})", lambda r: r * 3, GELU, ("lin", -15.0, 10.0)),
    # kiln's gelu with approximate = 1 (kOps in reference_test.cpp runs gelu(x, "tanh") for this file).
    "gelu_tanh": unary(lambda x: F.gelu(x, approximate="tanh"), "torch.nn.functional.gelu({x}, approximate='tanh')",
                       lambda r: r * 3, GELU, ("lin", -15.0, 10.0)),
    "softplus": unary(F.softplus, "torch.nn.functional.softplus({x})", lambda r: r * 8, SOFTPLUS, ("lin", -110.0, 30.0)),
    # kiln's softplus with beta = 2, threshold = 5 (kOps in reference_test.cpp runs softplus(x, 2, 5) for this file).
    "softplus_beta2": unary(lambda x: F.softplus(x, beta=2.0, threshold=5.0),
                            "torch.nn.functional.softplus({x}, beta=2.0, threshold=5.0)", lambda r: r * 4,
                            SOFTPLUS + [2.5, 2.4999998, 2.5000002], ("lin", -55.0, 15.0)),
}


def bits(value, dtype):
    """The bit pattern of `value` (a Python float already representable in
    dtype) as lower-case hex of the dtype's width."""
    if dtype == "f32":
        return "%08x" % struct.unpack("<I", struct.pack("<f", value))[0]
    if dtype == "f64":
        return "%016x" % struct.unpack("<Q", struct.pack("<d", value))[0]
    raise ValueError("no bit format for dtype " + dtype)


def human(value, dtype):
    """The shortest decimal that reads back as the same dtype value."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    for digits in range(1, 18):
        text = "%.*g" % (digits, value)
        try:
            if bits(float(text), dtype) == bits(value, dtype):
                return text
        except OverflowError:  # rounded past the largest finite value
            pass
    return repr(value)


def tensor_json(t, dtype):
    flat = t.detach().reshape(-1).to(torch.float64).tolist()
    return {"shape": list(t.shape), "data": [bits(v, dtype) + " " + human(v, dtype) for v in flat]}


def make_case(op, name, spec, dtype, inputs):
    """inputs: tensors (which get gradients) and Python floats (scalar
    operands). Runs the op and its backward in PyTorch."""
    tdtype = DTYPES[dtype]
    args, leaves, names = [], [], {}
    for n, x in zip(["x"] if spec["arity"] == 1 else ["a", "b"], inputs):
        if isinstance(x, float):
            as_tensor = n in spec.get("scalar_as_tensor", ())
            args.append(torch.tensor(x, dtype=tdtype) if as_tensor else x)
            names[n] = "torch.tensor(%r)" % x if as_tensor else repr(x)
        else:
            leaf = x.to(tdtype).detach().requires_grad_(True)
            args.append(leaf)
            leaves.append(leaf)
            names[n] = n
    out = spec["fn"](*args)
    gen = torch.Generator().manual_seed(zlib.crc32((op + "/" + name).encode()))
    upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(tdtype)
    grads = iter(torch.autograd.grad(out, leaves, upstream))
    return {
        "name": name,
        "op": op,
        "dtype": dtype,
        "expr": spec["expr"].format(**names),
        "inputs": [{"scalar": x} if isinstance(x, float) else tensor_json(x.to(tdtype), dtype) for x in inputs],
        "output": tensor_json(out, dtype),
        "grads": {
            "upstream": tensor_json(upstream, dtype),
            "inputs": [None if isinstance(x, float) else tensor_json(next(grads), dtype) for x in inputs],
        },
    }


def randn(shape, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def exact(values, dtype):
    """values rounded to the case's dtype, as a float64 tensor (so torch.tensor keeps them)."""
    t = torch.tensor(values, dtype=torch.float64)
    return t.to(torch.float32).to(torch.float64) if dtype == "f32" else t


def cases_for(op, spec, dtype):
    gen = torch.Generator().manual_seed(sum(map(ord, op)))
    cases = []
    if spec["arity"] == 1:
        mk = spec["make_input"]
        for shape in ([37], [4, 5], [2, 3, 4]):
            cases.append(make_case(op, "randn_" + "x".join(map(str, shape)), spec, dtype, [mk(randn(shape, gen))]))
        if spec["sweep"]:
            kind, lo, hi = spec["sweep"]
            if kind == "lin":
                xs = torch.linspace(lo, hi, 256, dtype=torch.float64)
            else:
                xs = torch.logspace(math.log10(lo), math.log10(hi), 256, dtype=torch.float64)
            cases.append(make_case(op, "sweep_%g_%g" % (lo, hi), spec, dtype, [xs]))
        extra = SPECIAL_F64 if dtype == "f64" else []
        cases.append(make_case(op, "special", spec, dtype, [exact(SPECIAL + spec["extra"] + extra, dtype)]))
    else:
        for sa, sb in (([37], [37]), ([4, 5], [4, 5]), ([2, 3], [3]), ([2, 1], [1, 3]), ([3], [2, 3]),
                       ([2, 3], [])):
            name = "randn_%s_%s" % ("x".join(map(str, sa)) or "0d", "x".join(map(str, sb)) or "0d")
            a = randn(sa, gen)
            b = randn(sb, gen)
            if op == "div":  # keep most quotients moderate; special covers the rest
                b = b.sign() * (b.abs() + 0.25)
            if op == "pow":  # positive bases (a negative one to a non-integer power is NaN)
                a = a.abs() * 2 + 0.05
            cases.append(make_case(op, name, spec, dtype, [a, b]))
        for s in (2.5, 0.1):
            base = randn([4, 5], gen)
            if op == "pow":
                base = base.abs() * 2 + 0.05
            cases.append(make_case(op, "tensor_scalar_%g" % s, spec, dtype, [base, s]))
            cases.append(make_case(op, "scalar_tensor_%g" % s, spec, dtype, [s, randn([4, 5], gen)]))
        if op == "pow":  # negative bases to integer powers, and large powers near overflow
            cases.append(make_case(op, "negative_base_integer_exponent", spec, dtype,
                                   [randn([2, 10], gen) * 3, torch.arange(-4.0, 6.0, dtype=torch.float64)]))
            cases.append(make_case(op, "near_overflow", spec, dtype,
                                   [torch.tensor([1.5, 2.0, 10.0, 0.5, 1.0001, 0.9999], dtype=torch.float64),
                                    torch.tensor([218.0, 127.9, 38.5, -149.0, 800000.0, 1000000.0],
                                                 dtype=torch.float64)]))
        pairs = exact(SPECIAL_PAIRS, dtype)
        cases.append(make_case(op, "special", spec, dtype, [pairs.reshape(-1, 1), pairs.reshape(1, -1)]))
    return cases


def dump(doc, indent=""):
    """JSON with one object key and one string per line, so that a diff
    shows which value changed; lists of numbers (shapes) stay on one line."""
    inner = indent + " "
    if isinstance(doc, dict):
        items = ['%s"%s": %s' % (inner, k, dump(v, inner)) for k, v in doc.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(doc, list) and doc and all(isinstance(v, (dict, str)) or v is None for v in doc):
        return "[\n" + ",\n".join(inner + dump(v, inner) for v in doc) + "\n" + indent + "]"
    return json.dumps(doc, allow_nan=False)


def cpu_model():
    """The CPU's model name: PyTorch's CPU results can depend on it (SLEEF's
    vector width, MKL's code path), so the files say where they were made."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ops", nargs="*", help="ops to regenerate (default: all)")
    parser.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    unknown = [op for op in args.ops if op not in OPS]
    if unknown:
        sys.exit("make_fixtures.py: unknown ops: " + ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)
    for op in args.ops or OPS:
        doc = {
            "format": FORMAT,
            "op": op,
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu": cpu_model(),
            "date": datetime.date.today().isoformat(),
            "generator": "tests/reference/make_fixtures.py",
            "cases": [c for dtype in DTYPES for c in cases_for(op, OPS[op], dtype)],
        }
        path = os.path.join(args.out, op + ".json")
        with open(path, "w") as f:
            f.write(dump(doc) + "\n")
        print("%s: %d cases, %d bytes" % (path, len(doc["cases"]), os.path.getsize(path)))


if __name__ == "__main__":
    main()
