#!/usr/bin/env python3
"""The PyTorch side of `kiln-bench --compare-torch` (docs/benchmarks.md).

kiln-bench runs this script once per run, under KILN_TORCH_PYTHON (default
python3), as `kiln-bench-torch.py` next to its executable, and talks to it
over pipes, one JSON object a line:

  1. The script imports torch and prints a hello:
       {"torch": "2.5.1", "threads": 2, "compile": true}
     or, when `import torch` fails, {"torch": null, "error": "..."} and exits 0.
  2. For each workload, kiln-bench writes a request, after it has measured
     kiln's side of that workload (so the two never share the cores):
       {"name": "softmax", "inputs": [{"dtype": "f32", "shape": [8192, 1024]}]}
     and the script answers with one flat object of medians:
       {"name": "softmax", "eager_ms": 3.1, "eager_runs": 20, "eager_first_ms": 9.0,
        "compiled_ms": 2.9, "compiled_runs": 20, "compile_ms": 5100.0,
        "compile_error": null, "error": null}
  3. It exits when its stdin closes.

The workloads mirror kiln's by name (tools/common/models.cpp and
tools/kiln-bench/workloads.cpp): the same ops at the same shapes and dtypes
(kiln-bench sends the shapes), each written as a PyTorch user would (native
softmax and layer_norm). They are measured as kiln-bench measures kiln's:
a first call (not timed with the rest), one warm-up call, then timed calls
under the same policy (--repeats N exactly, else 5 to 20 calls stopping after
5 once --budget-s is spent), the median of wall-clock times of whole calls,
on torch.set_num_threads(--threads) threads. torch.compile (default mode) is
tried for each workload; when it fails (no C++ compiler, say) the reply says
why in compile_error and the eager numbers stand.

`--check-names` reads `kiln-bench --list` on stdin and fails naming every
workload this script has no PyTorch version of (a lit test runs it).
"""

import argparse
import json
import os
import statistics
import sys
import time

# Set before torch is imported: inductor compiles in this process rather than
# in a pool of worker processes that would linger next to kiln's timed runs.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

torch = None  # imported by main(), so that --check-names runs without torch
F = None

# Constants the kiln models hard-code (tools/common/models.cpp).
DROPOUT_P = 0.1
LAYER_NORM_EPS = 1e-5
MLP_HIDDEN = (1024, 1024)
MLP_CLASSES = 10
ADAMW_LR = 1e-3
ADAMW_WEIGHT_DECAY = 1e-2  # PyTorch's AdamW default, kiln's too (optim::AdamWOptions)


def chain8(x):
    # mul, add, relu, sub, mul, maximum, minimum, neg: 8 ops as in kiln
    # (kiln's maximum/minimum with a scalar are clamp_min/clamp_max here).
    y = torch.relu(x * 1.5 + 0.25)
    y = (y - 0.5) * 2.0
    y = torch.clamp_max(torch.clamp_min(y, -1.0), 4.0)
    return -y


def chain8_math(x):
    y = x * 1.5 + 0.25
    y = torch.relu(y)
    y = torch.sqrt(y + 1.0)
    y = torch.sigmoid(y - 1.0)
    return torch.clamp_min(y, 0.6)


def layer_norm(x, w, b):
    return F.layer_norm(x, w.shape, w, b, LAYER_NORM_EPS)


def relu_dropout_layernorm_train(x, w, b, g):
    # kiln's model: leaves made from the inputs, y.backward(g), y and the
    # three gradients returned.
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    y = layer_norm(F.dropout(torch.relu(x), DROPOUT_P, training=True), w, b)
    y.backward(g)
    return y, x.grad, w.grad, b.grad


TRANSFORMER_HEADS = 8
TRANSFORMER_HIDDEN = 2048


def transformer_block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w1, b1, w2, b2, heads=TRANSFORMER_HEADS):
    # Pre-LN, no mask, exact GELU; per-head attention through
    # F.scaled_dot_product_attention, as kiln's tools::transformerBlock calls
    # kiln::scaledDotProductAttention (both fused on the CPU).
    seq, d = x.shape
    dh = d // heads
    qkv = F.linear(layer_norm(x, ln1_w, ln1_b), w_qkv, b_qkv)
    q, k, v = (qkv[:, i * d:(i + 1) * d].view(seq, heads, dh).transpose(0, 1) for i in range(3))
    o = F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(seq, d)
    h = x + F.linear(o, w_o, b_o)
    return h + F.linear(F.gelu(F.linear(layer_norm(h, ln2_w, ln2_b), w1, b1)), w2, b2)


# name -> function(list of input tensors) -> callable of no arguments that
# runs one call of the workload. A workload with state (the MLP and its
# optimizer) builds it here, once per side, so that eager and compiled do
# not share it.
def _pure(fn):
    def build(inputs, compile_fn):
        f = compile_fn(fn)
        return lambda: f(*inputs)

    return build


def _mlp_train_step(inputs, compile_fn, hidden=MLP_HIDDEN, autocast=None):
    x, y = inputs
    dims = (x.shape[1],) + hidden + (MLP_CLASSES,)
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW_LR)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        if autocast is None:
            loss = F.cross_entropy(model(x), y)
        else:  # kiln::autocast's forward and loss, as torch.autocast's
            with torch.autocast(DEVICE if DEVICE != "opencl" else "cpu", dtype=autocast):
                loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    f = compile_fn(step)
    return lambda: f(x, y)


def _transformer_train_step(inputs, compile_fn, hidden=TRANSFORMER_HIDDEN, blocks=1, checkpoint=False,
                            heads=TRANSFORMER_HEADS):
    # kiln's tools::TransformerTrainStep: transformer_block's 12 parameters
    # per block made by PyTorch's modules (layer norms ones and zeros,
    # linears drawn in the order QKV, output projection, MLP up, MLP down),
    # the blocks in a row (each under torch.utils.checkpoint when
    # `checkpoint`), F.mse_loss against the target, backward, AdamW with the
    # defaults.
    x, target = inputs
    d = x.shape[1]
    stack = []
    for _ in range(blocks):
        ln1, ln2 = torch.nn.LayerNorm(d, eps=LAYER_NORM_EPS), torch.nn.LayerNorm(d, eps=LAYER_NORM_EPS)
        qkv, out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        up, down = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)
        stack.append([ln1.weight, ln1.bias, qkv.weight, qkv.bias, out.weight, out.bias,
                      ln2.weight, ln2.bias, up.weight, up.bias, down.weight, down.bias])
    params = [p for block in stack for p in block]
    opt = torch.optim.AdamW(params, lr=ADAMW_LR, weight_decay=ADAMW_WEIGHT_DECAY)

    def run(h, *block):
        return transformer_block(h, *block, heads=heads)

    def forward(h):
        for block in stack:
            if checkpoint:
                h = torch.utils.checkpoint.checkpoint(run, h, *block, use_reentrant=False)
            else:
                h = run(h, *block)
        return h

    def step(x, target):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(forward(x), target)
        loss.backward()
        opt.step()
        return loss

    f = compile_fn(step)
    return lambda: f(x, target)


# ResNet-18 as torchvision builds it (tools/common/resnet.h), in plain
# torch.nn so that torchvision is not needed: the same modules, names,
# strides and initialization (kaiming_normal_ fan_out relu for the
# convolutions, batch norms ones and zeros).
RESNET_SGD_LR = 0.01
RESNET_SGD_MOMENTUM = 0.9


def _resnet18(num_classes=1000):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._layer(64, 2, 1)
            self.layer2 = self._layer(128, 2, 2)
            self.layer3 = self._layer(256, 2, 2)
            self.layer4 = self._layer(512, 2, 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _layer(self, planes, blocks, stride):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                           nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet()


def _resnet18_infer(inputs, compile_fn):
    (x,) = inputs
    model = _resnet18().eval()

    def infer(x):
        with torch.no_grad():
            return model(x)

    f = compile_fn(infer)
    return lambda: f(x)


def _resnet18_train_step(inputs, compile_fn):
    x, y = inputs
    model = _resnet18().train()
    opt = torch.optim.SGD(model.parameters(), lr=RESNET_SGD_LR, momentum=RESNET_SGD_MOMENTUM)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    f = compile_fn(step)
    return lambda: f(x, y)


WORKLOADS = {
    "chain8": _pure(chain8),
    "chain8_math": _pure(chain8_math),
    "bias_relu": _pure(lambda x, b: torch.relu(x + b)),
    "softmax": _pure(lambda x: torch.softmax(x, -1)),
    "layernorm": _pure(layer_norm),
    "relu_dropout": _pure(lambda x: F.dropout(torch.relu(x), DROPOUT_P, training=True)),
    "relu_dropout_layernorm": _pure(
        lambda x, w, b: layer_norm(F.dropout(torch.relu(x), DROPOUT_P, training=True), w, b)
    ),
    "matmul": _pure(lambda a, b: torch.matmul(a, b)),
    "linear": _pure(lambda x, w: F.linear(x, w)),
    "mlp": _pure(
        lambda x, w1, b1, w2, b2, w3, b3: F.linear(torch.relu(F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)), w3, b3)
    ),
    "mlp_train_step": _mlp_train_step,
    "mlp_train_step_small": lambda inputs, compile_fn: _mlp_train_step(inputs, compile_fn, hidden=(64, 64)),
    "mlp_train_step_bf16_autocast": lambda inputs, compile_fn: _mlp_train_step(
        inputs, compile_fn, autocast=torch.bfloat16),
    "relu_dropout_layernorm_train": _pure(relu_dropout_layernorm_train),
    "bias_gelu": _pure(lambda x, b: F.gelu(x + b)),
    "transformer_block": _pure(transformer_block),
    "transformer_train_step": _transformer_train_step,
    # kiln-bench's kStack: 4 blocks of d 128, 2 heads, MLP 512.
    "transformer_stack_train_step": lambda inputs, compile_fn: _transformer_train_step(
        inputs, compile_fn, hidden=512, blocks=4, heads=2),
    "transformer_stack_train_step_checkpointed": lambda inputs, compile_fn: _transformer_train_step(
        inputs, compile_fn, hidden=512, blocks=4, checkpoint=True, heads=2),
    # The same unfused ops as kiln's: torch.compile may fuse them, as
    # kiln's fuse-attention does.
    "attention": _pure(lambda q, k, v: torch.matmul(torch.softmax(torch.matmul(q, k.transpose(1, 2)) * 0.125, -1), v)),
    "resnet18_infer": _resnet18_infer,
    "resnet18_train_step": _resnet18_train_step,
}


def make_inputs(specs, name):
    """Tensors of the dtypes and shapes kiln-bench sent: standard normal for
    floating point, class labels in [0, MLP_CLASSES) for integers."""
    dtypes = {
        "f32": torch.float32,
        "f64": torch.float64,
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "i32": torch.int32,
        "i64": torch.int64,
        "bool": torch.bool,
    }
    g = torch.Generator().manual_seed(42)
    out = []
    for s in specs:
        dtype = dtypes.get(s["dtype"])
        if dtype is None:
            raise ValueError(f"{name}: no torch dtype for kiln dtype {s['dtype']}")
        shape = tuple(s["shape"])
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=g, dtype=torch.float32, device="cpu").to(dtype))
        elif dtype == torch.bool:
            out.append(torch.rand(shape, generator=g, device="cpu") < 0.5)
        else:
            out.append(torch.randint(0, MLP_CLASSES, shape, generator=g, dtype=dtype, device="cpu"))
    return [t.to(DEVICE) for t in out]


DEVICE = "cpu"  # --device: where the workloads run (kiln-bench's --device kind)


def synchronize():
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn, args):
    """Wall-clock ms of calls of fn, under kiln-bench's RunPolicy."""
    times = []
    start = time.perf_counter()
    while True:
        runs = len(times)
        if args.repeats > 0:
            if runs >= args.repeats:
                break
        elif runs >= args.max_runs or (runs >= args.min_runs and time.perf_counter() - start >= args.budget_s):
            break
        t0 = time.perf_counter()
        fn()  # the result is freed before the clock is read, as in kiln-bench
        synchronize()  # a call ends when the device has run it
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def one_line(e):
    """An exception as one short line (inductor's are pages long)."""
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    text = f"{type(e).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= 300 else text[:297] + "..."


def measure(request, args):
    name = request["name"]
    reply = {"name": name, "eager_ms": None, "eager_runs": 0, "eager_first_ms": None,
             "compiled_ms": None, "compiled_runs": 0, "compile_ms": None,
             "compile_error": None, "error": None}
    build = WORKLOADS.get(name)
    if build is None:
        reply["error"] = "no PyTorch version of this workload in kiln-bench-torch.py"
        reply["compile_error"] = reply["error"]
        return reply
    try:
        inputs = make_inputs(request["inputs"], name)
        eager = build(inputs, lambda f: f)
        t0 = time.perf_counter()
        eager()
        synchronize()
        reply["eager_first_ms"] = (time.perf_counter() - t0) * 1e3
        eager()  # warm-up
        times = time_calls(eager, args)
        reply["eager_ms"] = statistics.median(times)
        reply["eager_runs"] = len(times)
        del eager
    except Exception as e:  # a workload PyTorch cannot run: say so, go on
        reply["error"] = one_line(e)
        reply["compile_error"] = "eager failed"
        return reply
    if not args.compile:
        reply["compile_error"] = "disabled (--no-torch-compile)"
        return reply
    try:
        torch._dynamo.reset()
        compiled = build(inputs, torch.compile)
        t0 = time.perf_counter()
        compiled()  # traces, compiles (inductor: C++ or Triton) and runs
        synchronize()
        reply["compile_ms"] = (time.perf_counter() - t0) * 1e3
        compiled()  # warm-up (a stateful step may recompile once here)
        times = time_calls(compiled, args)
        reply["compiled_ms"] = statistics.median(times)
        reply["compiled_runs"] = len(times)
    except Exception as e:
        reply["compile_error"] = one_line(e)
    return reply


def check_names():
    names = [line.split()[0] for line in sys.stdin if line.strip()]
    missing = [n for n in names if n not in WORKLOADS]
    for n in missing:
        print(f"kiln-bench-torch.py: no PyTorch version of workload '{n}'", file=sys.stderr)
    print(f"{len(names) - len(missing)} of {len(names)} workloads have a PyTorch version")
    return 1 if missing or not names else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (kiln's pool size)")
    p.add_argument("--repeats", type=int, default=0, help="exactly N timed calls (0: adaptive)")
    p.add_argument("--min-runs", type=int, default=5)
    p.add_argument("--max-runs", type=int, default=20)
    p.add_argument("--budget-s", type=float, default=1.0)
    p.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (kiln-bench --device)")
    p.add_argument("--check-names", action="store_true", help="check `kiln-bench --list` on stdin")
    args = p.parse_args()
    if args.check_names:
        return check_names()

    # The protocol has stdout to itself: whatever else writes to fd 1
    # (a library's print, the C++ compiler inductor runs) goes to stderr.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    global torch, F
    try:
        import torch as _torch
        import torch.nn.functional as _F
    except Exception as e:
        send({"torch": None, "error": f"import torch failed in {sys.executable}: {one_line(e)}"})
        return 0
    torch, F = _torch, _F
    import torch.utils.checkpoint  # noqa: F401 (the checkpointed workloads)
    global DEVICE
    DEVICE = args.device
    if DEVICE != "cpu":
        if DEVICE.startswith("cuda") and not torch.cuda.is_available():
            send({"torch": None, "error": f"PyTorch {torch.__version__} sees no CUDA device"})
            return 0
        torch.set_default_device(DEVICE)  # the workloads' modules and state are made there
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    # The vector ISA PyTorch's CPU kernels dispatch to ("AVX512", "AVX2",
    # "DEFAULT"), beside what kiln compiles for; older torch has no such call.
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: "")()
    send({"torch": torch.__version__, "threads": torch.get_num_threads(), "compile": args.compile,
          "python": sys.executable, "cpu_capability": capability})
    for line in sys.stdin:
        if line.strip():
            send(measure(json.loads(line), args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
