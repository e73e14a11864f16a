#!/usr/bin/env python3
"""Compare the CUDA Runner's launch traces of two revisions, without a GPU.

Builds tests/cuda/trace/trace_main.cpp twice over the recording stubs (trace_stubs.cpp): once
with src/backend/cuda/runner*.{cpp,h} of the working tree, once with those of --base (a git
revision; defines ZINC_TRACE_OLD for the harness's buffer names when --old-layout is given). Both
link the working tree's built libzinc_model/gguf/quant. Then runs each on every model given,
under each switch setting, and diffs the traces: every kernel launch with its arguments, copy,
sync, graph capture/replay, the evidence tally of each step and the captured intermediates.

    tests/cuda/trace/compare.py --base f4b958d --old-layout --build-dir build \\
        models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf

Exit 0 when every trace is identical. For a refactoring of the Runner that must not change
what the GPU executes (e.g. the op-list executor replacing the hand-written decoder).
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

RUNNER_FILES = ["runner.cpp", "runner_init.cpp", "runner_sample.cpp", "runner_impl.h",
                "runner_exec.cpp"]

SETTINGS = [
    ("exact", {}),
    ("exact, no graphs", {"ZINC_CUDA_GRAPH": "0"}),
    ("exact, FUSED_PROJ=0 FUSED_NORM=0", {"ZINC_FUSED_PROJ": "0", "ZINC_FUSED_NORM": "0"}),
    ("exact (ZINC_EXACT=1)", {"ZINC_EXACT": "1"}),
    ("fast, ZINC_FA=0", {"ZINC_EXACT": "0", "ZINC_FA": "0"}),
    ("fast", {"ZINC_EXACT": "0"}),
    ("fast, no cuBLAS", {"ZINC_EXACT": "0", "ZINC_TRACE_CUBLAS": "0"}),
    ("corrupt attn_out:0", {"ZINC_TRACE_CORRUPT": "attn_out:0"}),
    ("corrupt ffn_glu:1", {"ZINC_TRACE_CORRUPT": "ffn_glu:1"}),
    ("corrupt ffn_out:1", {"ZINC_TRACE_CORRUPT": "ffn_out:1"}),
    ("corrupt Vcur:0", {"ZINC_TRACE_CORRUPT": "Vcur:0"}),
    ("corrupt l_out:last", {"ZINC_TRACE_CORRUPT": "l_out:last"}),
    ("corrupt ffn_inp:last", {"ZINC_TRACE_CORRUPT": "ffn_inp:last"}),
    ("corrupt attn_out:last", {"ZINC_TRACE_CORRUPT": "attn_out:last"}),
    ("cpu glu", {"ZINC_TRACE_CPU_OPS": "glu"}),
]


def build(out, runner_dir, build_dir, old, cxx):
    srcs = [os.path.join(HERE, "trace_main.cpp"), os.path.join(HERE, "trace_stubs.cpp"),
            os.path.join(SRC, "src", "backend", "cuda", "repack.cpp")]
    for f in RUNNER_FILES:
        p = os.path.join(runner_dir, "backend", "cuda", f)
        if f.endswith(".cpp") and os.path.exists(p):
            srcs.append(p)
    libs = [os.path.join(build_dir, f"libzinc_{n}.a") for n in ("model", "gguf", "quant")]
    cmd = [cxx, "-std=c++20", "-O1", "-w", "-I", os.path.join(HERE, "include"), "-I", HERE,
           "-I", runner_dir, "-I", os.path.join(SRC, "src")]
    if old:
        cmd.append("-DZINC_TRACE_OLD")
    cmd += srcs + libs + ["-lpthread", "-ldl", "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"build of {out} failed:\n{' '.join(cmd)}\n{r.stderr[-6000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="git revision of the reference runner")
    ap.add_argument("--old-layout", action="store_true",
                    help="the base names its activation buffers x_, q_, ... (before the op list)")
    ap.add_argument("--build-dir", default=os.path.join(SRC, "build"))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--keep", help="write the traces to this folder")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="zinc-trace-") as work:
        base_dir = os.path.join(work, "base")
        os.makedirs(os.path.join(base_dir, "backend", "cuda"))
        for f in RUNNER_FILES:
            r = subprocess.run(["git", "-C", SRC, "show", f"{a.base}:src/backend/cuda/{f}"],
                               capture_output=True)
            if r.returncode == 0:
                with open(os.path.join(base_dir, "backend", "cuda", f), "wb") as fh:
                    fh.write(r.stdout)
        new_dir = os.path.join(SRC, "src")
        exe_base, exe_new = os.path.join(work, "trace_base"), os.path.join(work, "trace_new")
        build(exe_base, base_dir, a.build_dir, a.old_layout, a.cxx)
        build(exe_new, new_dir, a.build_dir, False, a.cxx)
        bad = 0
        for model in a.models:
            for label, env in SETTINGS:
                e = dict(os.environ)
                for k in list(e):
                    if k.startswith("ZINC_"):
                        del e[k]
                e.update(env)
                outs = []
                for exe in (exe_base, exe_new):
                    r = subprocess.run([exe, model], capture_output=True, text=True, env=e,
                                       timeout=600)
                    if r.returncode != 0:
                        sys.exit(f"{exe} {model} [{label}] failed: {r.stderr[-2000:]}")
                    outs.append(r.stdout.splitlines())
                name = f"{os.path.basename(model)} [{label}]"
                if a.keep:
                    os.makedirs(a.keep, exist_ok=True)
                    for tag, o in zip(("base", "new"), outs):
                        fn = f"{os.path.basename(model)}.{label.replace(' ', '_')}.{tag}.txt"
                        with open(os.path.join(a.keep, fn), "w") as fh:
                            fh.write("\n".join(o) + "\n")
                if outs[0] == outs[1]:
                    n_launch = sum(1 for l in outs[0] if not l.startswith(("==", "tally",
                                                                          "captured", "launches")))
                    print(f"SAME {name}: {n_launch} trace lines")
                else:
                    bad += 1
                    print(f"DIFF {name}:")
                    for l in list(difflib.unified_diff(outs[0], outs[1], "base", "new",
                                                       lineterm="", n=2))[:60]:
                        print("   " + l)
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
