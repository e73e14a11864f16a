"""What a result carries about where it ran: host, CPU, GPU, memory, load average, the model
file's sha256 and GGUF metadata, and a measured memory-copy bandwidth for the bandwidth bound."""
import datetime
import hashlib
import os
import platform
import shutil
import subprocess
import time

from . import gguf_header


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def gpu_info():
    """[{name, driver, memory_total}] from nvidia-smi, [] when there is none."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for ln in out.strip().splitlines():
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) == 3:
            gpus.append({"name": parts[0], "driver": parts[1], "memory_total": parts[2]})
    return gpus


def load_avg():
    return list(os.getloadavg())


def uptime_line():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def host_info():
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal"):
                    mem = int(ln.split()[1]) * 1024
    except OSError:
        pass
    return {"date": now_utc(), "host": platform.node(), "cpu": cpu_model(),
            "n_cpus": os.cpu_count(), "mem_bytes": mem, "gpus": gpu_info(),
            "kernel": platform.release(), "python": platform.python_version(),
            "load_avg": load_avg(), "uptime": uptime_line()}


def sha256_file(path, _cache={}):
    """sha256 hex of a file (memoised by path, size and mtime)."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _cache[key] = h.hexdigest()
    return _cache[key]


def model_info(path):
    """Architecture, context length, layer/head shape and tensor bytes from the GGUF header
    (gguf_header.py, so it also works where the gguf pip package is missing), plus file size and
    sha256."""
    info = {"path": str(path), "file_bytes": os.path.getsize(path), "sha256": sha256_file(path)}
    try:
        h = gguf_header.read_header(path)
        kv = h["kv"]
        arch = kv["general.architecture"]

        def get(key, default=None):
            v = kv.get(f"{arch}.{key}")
            return int(v) if isinstance(v, (int, float)) else default
        n_embd, n_head = get("embedding_length"), get("attention.head_count")
        ts = h["tensors"]
        info.update({
            "arch": arch, "n_ctx_train": get("context_length"), "n_layer": get("block_count"),
            "n_embd": n_embd, "n_head": n_head,
            "n_head_kv": get("attention.head_count_kv", n_head),
            "head_dim_k": get("attention.key_length", n_embd // n_head if n_head else None),
            "head_dim_v": get("attention.value_length", n_embd // n_head if n_head else None),
            "tensor_bytes": sum(t["n_bytes"] for t in ts),
            "token_embd_bytes": sum(t["n_bytes"] for t in ts if t["name"] == "token_embd.weight"),
            "has_output_weight": any(t["name"] == "output.weight" for t in ts),
        })
        if isinstance(kv.get("general.name"), str):
            info["name"] = kv["general.name"]
    except (OSError, KeyError, gguf_header.GGUFHeaderError) as e:
        # the header is informative only; the sha256 is what fairness needs
        info["gguf_error"] = f"{type(e).__name__}: {e}"
    return info


def decode_bytes_per_token(mi, depth):
    """Bytes a decode step must read at KV depth `depth`: every weight once (the token embedding
    only for its one row, unless it is tied as the output matrix) plus f16 K and V of `depth`
    positions in every layer. The lower bound of bytes moved, hence tokens/s <= bandwidth / this."""
    need = ("tensor_bytes", "n_layer", "n_head_kv", "head_dim_k", "head_dim_v")
    if any(mi.get(k) is None for k in need) or not mi["tensor_bytes"]:
        return None
    w = mi["tensor_bytes"]
    if mi.get("has_output_weight"):
        w -= mi["token_embd_bytes"]  # only one row of the embedding is read per token
    kv = mi["n_layer"] * depth * mi["n_head_kv"] * (mi["head_dim_k"] + mi["head_dim_v"]) * 2
    return w + kv


TORCH_COPY = """
import json, time, torch
if not torch.cuda.is_available():
    print(json.dumps({"bytes_per_s": None, "method": "torch sees no GPU"})); raise SystemExit
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
for _ in range(3):
    b.copy_(a)
torch.cuda.synchronize()
reps = 20
t0 = time.perf_counter()
for _ in range(reps):
    b.copy_(a)
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(json.dumps({"bytes_per_s": 2 * n * reps / dt, "device": torch.cuda.get_device_name(0),
                  "method": "torch device-to-device copy of 1 GiB, read + write, 20 reps"}))
"""


def copy_bw_from_bin(bin_path):
    """The copy rate tests/cuda/bench_runner prints with --copy-bw ("copy bandwidth (d2d,
    read+write): N GB/s"), as measure_copy_bandwidth's dict; None when it says nothing usable."""
    import re
    try:
        p = subprocess.run([str(bin_path), "--copy-bw"], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"bytes_per_s": None, "method": f"{bin_path} --copy-bw failed: {e}"}
    m = re.search(r"copy bandwidth[^:]*:\s*([\d.]+)\s*GB/s", p.stdout)
    if p.returncode != 0 or not m:
        return {"bytes_per_s": None, "method": f"{bin_path} --copy-bw failed ({p.returncode}): "
                f"{(p.stdout + p.stderr).strip()[-300:]}"}
    return {"bytes_per_s": float(m.group(1)) * 1e9,
            "method": f"{os.path.basename(str(bin_path))} --copy-bw (device-to-device copy, "
            "read + write)"}


def measure_copy_bandwidth(target, fallback_bin=None):
    """Bytes/s of a large memory copy, counting bytes read plus written: on 'cuda' a device-to-
    device copy through PyTorch, in a child process (so that no PyTorch context holds GPU memory
    while the engines run), on 'cpu' numpy's copy of a 256 MiB array.
    Returns {"bytes_per_s", "method"}; bytes_per_s is None (with the reason) when it cannot be
    measured, and the report then leaves the % of bound out rather than assume a number."""
    if target == "cuda":
        import json
        import sys
        try:
            p = subprocess.run([sys.executable, "-c", TORCH_COPY], capture_output=True, text=True,
                               timeout=120)
            lines = p.stdout.strip().splitlines()
            got = json.loads(lines[-1]) if p.returncode == 0 and lines else \
                {"bytes_per_s": None, "method": f"torch copy failed ({p.returncode}): "
                 f"{p.stderr.strip()[-300:]}"}
        except (OSError, subprocess.TimeoutExpired, ValueError) as e:
            got = {"bytes_per_s": None, "method": f"torch copy failed: {e}"}
        if got.get("bytes_per_s") is None and fallback_bin:
            alt = copy_bw_from_bin(fallback_bin)
            if alt.get("bytes_per_s"):
                return alt
            got["method"] += "; " + alt["method"]
        return got
    import numpy as np
    n = 256 << 20
    a = np.ones(n, dtype=np.uint8)
    b = np.empty_like(a)
    np.copyto(b, a)
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return {"bytes_per_s": 2 * n / best,
            "method": "numpy copy of 256 MiB, read + write, best of 5, one thread"}
