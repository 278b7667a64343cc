#!/usr/bin/env python3
"""The torch.distributed side of `kiln-bench-dist` (docs/benchmarks.md).

kiln-bench-dist runs this script, installed next to it as
`kiln-bench-dist-torch.py`, under KILN_TORCH_PYTHON (default python3), after
it has measured kiln's side at the same process count, so the two never
share the cores:

  --probe --result FILE
      one process; writes {"torch": "2.5.1"} to FILE, or, when `import
      torch` fails, {"torch": null, "error": "torch not importable: ..."}.
      Exits 0 either way.
  --result FILE --sizes B1,B2,... --iters I1,I2,... --warmup W --timeout S
      one process per rank, with torchrun's variables (RANK, WORLD_SIZE,
      MASTER_ADDR=127.0.0.1, MASTER_PORT: a free port rank 0 serves
      torch's TCPStore on). Each rank joins torch.distributed with the gloo
      backend, and for each size all-reduces (sum) a zero f32 tensor of B
      bytes: W untimed calls, then I timed ones, each the wall clock of one
      dist.all_reduce call as kiln's side times kiln's (a whole, blocking
      call). Each call's time is the slowest rank's (an all-reduce max of
      the samples afterwards), and rank 0 writes the medians:
        {"torch": "2.5.1", "processes": 2,
         "rows": [{"bytes": 1024, "ms": 0.21, "iters": 20}, ...]}

Everything is on loopback: GLOO_SOCKET_IFNAME=lo unless already set.
"""

import argparse
import json
import os
import statistics
import sys
import time


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def probe(path):
    try:
        import torch  # noqa: F401
        import torch.distributed as dist

        if not dist.is_available():
            raise RuntimeError("torch.distributed is not available in this build")
        write(path, {"torch": torch.__version__})
    except Exception as e:  # ImportError, or a broken install
        write(path, {"torch": None, "error": "torch not importable: %s: %s" % (type(e).__name__, e)})
    return 0


def ints(text):
    return [int(v) for v in text.split(",") if v]


def measure(args):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import datetime

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo", init_method="env://", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=args.timeout))
    sizes, iters = ints(args.sizes), ints(args.iters)
    if len(sizes) != len(iters):
        raise SystemExit("kiln-bench-dist-torch: --sizes and --iters differ in length")
    rows = []
    for size, n in zip(sizes, iters):
        t = torch.zeros(size // 4, dtype=torch.float32)
        warmup = min(args.warmup, 1) if size > (16 << 20) else args.warmup
        for _ in range(warmup):
            dist.all_reduce(t)
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            dist.all_reduce(t)
            samples.append((time.perf_counter() - start) * 1e3)
        slowest = torch.tensor(samples, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        rows.append({"bytes": size, "ms": statistics.median(slowest.tolist()), "iters": n})
        if rank == 0:
            print("kiln-bench-dist: torch all-reduce %d bytes at %d processes" % (size, world),
                  file=sys.stderr, flush=True)
    dist.barrier()  # before anyone leaves (Gloo closes sockets with a reset)
    dist.destroy_process_group()
    if rank == 0:
        write(args.result, {"torch": torch.__version__, "processes": world, "rows": rows})
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--probe", action="store_true")
    p.add_argument("--result", required=True)
    p.add_argument("--sizes", default="")
    p.add_argument("--iters", default="")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timeout", type=int, default=1800)
    args = p.parse_args()
    return probe(args.result) if args.probe else measure(args)


if __name__ == "__main__":
    sys.exit(main())
