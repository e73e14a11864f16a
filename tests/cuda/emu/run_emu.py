#!/usr/bin/env python3
"""tests/cuda/emu/run_emu.py — run tests/cuda/test_exact_ops.cpp on the CPU, with the CUDA kernels
of the exact tier (dmmv_exact.cu, dmmv_exact_gemm.cu, pack.cu, gemm.cu) compiled by the host
compiler against the emulation headers in tests/cuda/emu/include (one std::thread per CUDA
thread, shuffles and __syncthreads as barriers). CI has no GPU; this checks the kernels' index
math, lane splits, chain orders and butterflies bit for bit against the CPU tier.

    run_emu.py --build-dir BUILD [--source-dir SRC] [--work DIR] [--cxx g++] [--with-gemm]

BUILD must hold libzinc_quant.a. By default ZINC_EXACT_GEMM=0, so every row count runs
dmmv_exact's kernels; --with-gemm lets steps of more than 16 rows take dmmv_exact_gemm.cu. `kernel<<<cfg>>>(args)` is rewritten to
`emu_launcher(kernel, cfg)(args)`; nothing else in the sources is changed. Exit status: the
test's (0: every comparison bitwise equal)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

KERNELS = ["dmmv_exact.cu", "dmmv_exact_gemm.cu", "pack.cu", "gemm.cu"]
LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\(", re.S)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    ap.add_argument("--work")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--with-gemm", action="store_true")
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    work = a.work or tempfile.mkdtemp(prefix="zinc-cuda-emu-")
    os.makedirs(work, exist_ok=True)
    emu = os.path.join(src, "tests", "cuda", "emu")
    flags = ["-std=c++20", "-O1", "-ffp-contract=off", "-pthread", "-w", "-DZINC_CUDA_EMU=1",
             "-I" + os.path.join(emu, "include"), "-I" + os.path.join(src, "src")]
    units = []
    for k in KERNELS:
        path = os.path.join(src, "src", "backend", "cuda", k)
        if not os.path.exists(path):
            continue
        text = open(path).read()
        text = LAUNCH.sub(lambda m: "emu_launcher(" + m.group(1) + ", " + m.group(2) + ")(", text)
        out = os.path.join(work, k.replace(".cu", "_emu.cpp"))
        with open(out, "w") as f:
            f.write(text)
        units.append(out)
    units += [os.path.join(emu, "stubs.cpp"), os.path.join(src, "tests", "cuda", "test_exact_ops.cpp")]

    def compile_one(u):
        obj = os.path.join(work, os.path.basename(u) + ".o")
        r = subprocess.run([a.cxx] + flags + ["-c", u, "-o", obj], capture_output=True, text=True)
        return obj, r

    with ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(compile_one, units))
    for obj, r in results:
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            return 2
    exe = os.path.join(work, "test_exact_ops_emu")
    lib = os.path.join(os.path.abspath(a.build_dir), "libzinc_quant.a")
    r = subprocess.run([a.cxx, "-pthread", "-o", exe] + [o for o, _ in results] + [lib],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        return 2
    env = dict(os.environ)
    env["ZINC_EXACT_GEMM"] = "1" if a.with_gemm else "0"
    return subprocess.run([exe], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
