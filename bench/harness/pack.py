#!/usr/bin/env python3
"""bench/device-run pack: lay out what the H200 benchmark needs into one carry per device call,
each under the tool's 64 MiB together with the working tree that travels with every call.

Inputs (scripts/gpu-pack makes them): .gpu/bin (zinc, cuda_bench_runner, ...), .gpu/lib,
.gpu/vocab.gguf, and llama.cpp as either a prebuilt .gpu/peer/llama-cuda.tar.xz (llama-bench +
llama-server, CUDA) or its sources .gpu/llama-src.tar.gz (built there in the background); the
SmolLM2 file (models/), which travels in pieces with a sha256 and a piece count.

Layout: .gpu-bench (the last call, the benchmark) holds zinc-bin.tar.xz; llama.cpp goes into
the first call (.gpu-p1) so that its build starts as early as possible; SmolLM2's pieces fill
what room is left (.gpu-p1, .gpu-p2, .gpu-bench, and a .gpu-p3 call only when those are full;
the pieces are numbered in call order, joined once all are there). Prints the
call sequence with each call's size; the last stash call waits for llama.cpp's build.
"""
import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

MIB = 1 << 20
LIMIT = 64 * MIB
MARGIN = 2 * MIB  # the tree is measured here; allow for files written before the call
CARRIES = (".gpu-p1", ".gpu-p2", ".gpu-p3", ".gpu-bench")  # in call order; .gpu-p3 if needed
FILL = (".gpu-p1", ".gpu-p2", ".gpu-bench", ".gpu-p3")  # the order model pieces fill them
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def tree_bytes(root):
    """Bytes of the tracked and untracked-not-ignored files: what travels with every call."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    total = 0
    for f in files:
        p = root / f.decode(errors="replace")
        if f and p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def plan(tree, fixed, model_bytes, limit=LIMIT, margin=MARGIN):
    """fixed: {carry: bytes already in it}; returns ({carry: model bytes it takes}, error).
    The model fills the carries in order; a carry's room is limit - margin - tree - fixed."""
    room = {c: limit - margin - tree - fixed.get(c, 0) for c in CARRIES}
    bad = [c for c, r in room.items() if r < 0]
    if bad:
        return None, f"{bad[0]} is over the limit before any model piece ({fixed.get(bad[0])} " \
                     f"bytes + the {tree}-byte tree)"
    take, left = {}, model_bytes
    for c in FILL:
        n = min(left, room[c])
        if n > 0:
            take[c] = n
            left -= n
    if left > 0:
        return None, f"{model_bytes - left} of {model_bytes} model bytes fit the calls"
    return take, None


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(MIB), b""):
            h.update(b)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/device-run pack")
    ap.add_argument("model", nargs="?", default=f"models/{SMOL}")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    a = ap.parse_args(argv)
    root = Path(a.root)
    gpu = root / ".gpu"
    model = Path(a.model) if Path(a.model).is_absolute() else root / a.model
    if not (gpu / "bin" / "zinc").exists():
        sys.exit("device-run pack: .gpu/bin/zinc missing: run scripts/gpu-pack first")
    if not model.exists():
        sys.exit(f"device-run pack: {model} missing (scripts/fetch-models)")
    peer = gpu / "peer" / "llama-cuda.tar.xz"
    src = next((p for p in (gpu / "llama-src.tar.gz", root / "build-peer" / "llama-src.tar.gz")
                if p.exists()), None)
    if not peer.exists() and src is None:
        sys.exit("device-run pack: neither .gpu/peer/llama-cuda.tar.xz nor llama.cpp's sources "
                 "(.gpu/llama-src.tar.gz; scripts/gpu-pack makes it) exist")
    # the carries must not travel as untracked files with every call: ignore them (a worktree's
    # exclude file is the common one)
    excl = Path(subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip())
    excl = excl if excl.is_absolute() else root / excl
    excl.parent.mkdir(parents=True, exist_ok=True)
    have = excl.read_text().splitlines() if excl.exists() else []
    with open(excl, "a") as f:
        for c in CARRIES:
            if f"/{c}/" not in have:
                f.write(f"/{c}/\n")
    for c in CARRIES:
        shutil.rmtree(root / c, ignore_errors=True)
        (root / c).mkdir()
    items = [x for x in ("bin", "lib", "vocab.gguf") if (gpu / x).exists()]
    arc = root / ".gpu-bench" / "zinc-bin.tar.xz"
    subprocess.run(f"tar -C {gpu} -cf - {' '.join(items)} | xz -T2 -6 > {arc}", shell=True,
                   check=True)
    p1 = peer if peer.exists() else src
    shutil.copy(p1, root / ".gpu-p1" / p1.name)
    tree = tree_bytes(root)
    fixed = {".gpu-p1": p1.stat().st_size, ".gpu-bench": arc.stat().st_size}
    size = model.stat().st_size
    take, err = plan(tree, fixed, size)
    if err:
        sys.exit(f"device-run pack: does not fit: {err}")
    digest = sha256(model)
    with open(model, "rb") as f:
        for k, c in enumerate([c for c in CARRIES if c in take], start=1):
            (root / c / f"{model.name}.part{k}").write_bytes(f.read(take[c]))
            (root / c / f"{model.name}.sha256").write_text(digest + "\n")
            (root / c / f"{model.name}.npieces").write_text(f"{len(take)}\n")
    used = [c for c in CARRIES if c == ".gpu-p1" or c == ".gpu-bench" or c in take]
    for c in CARRIES:
        if c not in used:
            shutil.rmtree(root / c)
    print(f"device-run pack: the working tree travels with every call: {tree / MIB:.1f} MiB")
    for c in used:
        s = sum(p.stat().st_size for p in (root / c).iterdir())
        print(f"  carry [\"{c}\"]: {(s + tree) / MIB:.1f} MiB "
              f"({', '.join(p.name for p in sorted((root / c).iterdir()))})")
    print("calls, back to back (each within 30 s of the last, or the machine and /tmp are gone):")
    stash = [c for c in used if c != ".gpu-bench"]
    for k, c in enumerate(stash, start=1):
        wait = " --wait-peer 540   timeout_s: 600" if k == len(stash) and not peer.exists() \
            else ""
        print(f"  {k}. carry [\"{c}\"]     command: bench/device-run stash{wait}")
    print(f"  {len(stash) + 1}. carry [\".gpu-bench\"]  command: bench/device-run all "
          "--budget-s 560   timeout_s: 600")
    if not peer.exists():
        print("""  (call 1 starts llama.cpp's CUDA build in the background; the last stash call
   waits for it and returns the built binaries as llama-cuda.tar.xz.part*: here
   mkdir -p .gpu/peer && cat FILES_AT/llama-cuda.tar.xz.part* > .gpu/peer/llama-cuda.tar.xz
   and check it against FILES_AT/llama-cuda.tar.xz.sha256: later sessions skip the build)""")
    print("""then here: mkdir -p docs/bench/cuda && cp FILES_AT/* docs/bench/cuda/ &&
           bench/report docs/bench/cuda/results.json --docs docs/benchmarks.md""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
