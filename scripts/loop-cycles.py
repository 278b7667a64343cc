#!/usr/bin/env python3
"""Cycles per element of a compiled CPU kernel's vector loops, by llvm-mca.

    scripts/loop-cycles.py --example softmax [--cpu skylake-avx512] [--irdump build/bin/irdump]

Traces the irdump example with the default fusion passes, takes its kernels'
LLVM IR after the O3 pipeline as kiln runs it for CPU `--cpu` (KILN_CPU, Note
[KILN_CPU] in codegen/llvm_jit.cpp; default: this host), compiles it with
llc for that CPU and runs llvm-mca on every main vector loop (an IR block
named vector.body*, its element count from `%index.next = add nuw i64
%index, N`). Prints, per loop, llvm-mca's cycles per iteration (steady
state, 200 iterations), the elements an iteration handles and their ratio,
and per kernel the sum over its loops: the cycles one element costs on one
core when its data is in cache. docs/fusion.md ("Transcendentals on
AVX-512") quotes it. It measures the model LLVM has of the CPU, not the
machine: compare kernels and code shapes with it, not machines.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PASSES = "canonicalize,fold-constants,cse,dce,fuse-reductions,fuse-elementwise"


def run(cmd, env=None, stdin=None):
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"loop-cycles: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def split_modules(text):
    """irdump prints one module per kernel, each starting with '; ModuleID'."""
    parts = re.split(r"(?m)^(?=; ModuleID = )", text)
    return [p for p in parts if p.startswith("; ModuleID")]


def vector_loops(module_ir):
    """(block name, elements per iteration) of each main vector loop."""
    loops = []
    for m in re.finditer(r"(?m)^(vector\.body\d*):", module_ir):
        name = m.group(1)
        body = module_ir[m.end():]
        end = re.search(r"(?m)^\S", body)
        body = body[: end.start()] if end else body
        step = re.search(r"= add (?:nuw )?(?:nsw )?i64 %index\d*, (\d+)", body)
        if step:
            loops.append((name, int(step.group(1))))
    return loops


def asm_block(asm, block):
    """The instructions of the machine block llc labelled with IR block `block`."""
    lines = asm.splitlines()
    out, inside = [], False
    for line in lines:
        if re.match(r"^\.LBB\d+_\d+:.*# %" + re.escape(block) + r"$", line):
            inside = True
            continue
        if inside:
            if re.match(r"^(\.LBB|\S+:)", line) or line.strip().startswith("# %bb."):
                break
            s = line.strip()
            if s and not s.startswith(("#", ".p2align", ".loc")):
                out.append(s)
    return out


def mca_cycles(instructions, cpu):
    report = run(["llvm-mca-19", f"-mcpu={cpu}", "-iterations=200"], stdin="\n".join(instructions) + "\n")
    total = int(re.search(r"Total Cycles:\s+(\d+)", report).group(1))
    return total / 200.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", required=True, help="irdump example (irdump --list-examples)")
    ap.add_argument("--cpu", default="", help="LLVM CPU name (KILN_CPU); default: the host")
    ap.add_argument("--irdump", default="build/bin/irdump")
    args = ap.parse_args()

    env = dict(os.environ)
    if args.cpu:
        env["KILN_CPU"] = args.cpu
    ir = run([args.irdump, "--example", args.example, f"--passes={PASSES}", "--emit=llvm-opt"], env=env)
    cpu = args.cpu or re.search(r"Host CPU:\s*(\S+)", run(["llc-19", "--version"])).group(1)
    print(f"{args.example} for {cpu} (llvm-mca cycles, steady state, data in cache)")
    for module in split_modules(ir):
        name = re.search(r"; ModuleID = '([^']+)'", module).group(1)
        with tempfile.NamedTemporaryFile("w", suffix=".ll", delete=False) as f:
            f.write(module)
            path = f.name
        try:
            asm = run(["llc-19", "-O3", f"-mcpu={cpu}", "-o", "-", path])
        finally:
            os.unlink(path)
        total = 0.0
        print(f"  kernel {name}")
        for block, elements in vector_loops(module):
            instrs = asm_block(asm, block)
            if not instrs:
                print(f"    {block}: not found in llc's output")
                continue
            cycles = mca_cycles(instrs, cpu)
            total += cycles / elements
            print(f"    {block:<16} {len(instrs):4d} instructions, {cycles:7.2f} cycles / {elements:3d} elements"
                  f" = {cycles / elements:.3f} cycles/element")
        print(f"    sum over its loops: {total:.3f} cycles/element")


if __name__ == "__main__":
    main()
