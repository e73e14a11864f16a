"""Device memory each engine used, for the report's memory table (GPU runs):

zinc       what its CUDA runner says it holds: `device_memory` in GET /health (zinc serve) and
           in `zinc bench --json` (weights as uploaded, the KV pool, scratch), null on the CPU tier.
llama.cpp  what its log says it allocated on the device: the `CUDA0 model buffer size = X MiB`,
           `CUDA0 KV buffer size` and `CUDA0 compute buffer size` lines (summed over devices).
both       the driver's view (nvidia-smi): the server process's used memory when nvidia-smi lists
           it by pid, else the device's used memory minus the idle baseline taken before any
           engine started (one engine runs at a time, so the difference is that engine's).
"""
import re
import shutil
import subprocess

MIB = 1 << 20
LLAMA_BUF_RE = re.compile(r"\b(CUDA\d+)\s+(model|KV|compute|RS) buffer size\s*=\s*([\d.]+)\s*MiB")


def llama_log_memory(log_text):
    """{'weight_bytes', 'kv_bytes', 'scratch_bytes', 'total_bytes'} from llama.cpp's buffer lines
    (scratch: its compute buffers; RS buffers of recurrent models count as KV), or None when the
    log has no device buffer line. A line repeated (a context created twice) counts once per
    (device, kind, size)."""
    seen = set()
    got = {"model": 0.0, "KV": 0.0, "compute": 0.0}
    for dev, kind, mib in LLAMA_BUF_RE.findall(log_text or ""):
        key = (dev, kind, mib)
        if key in seen:
            continue
        seen.add(key)
        got["KV" if kind == "RS" else kind] += float(mib)
    if not seen:
        return None
    out = {"weight_bytes": int(got["model"] * MIB), "kv_bytes": int(got["KV"] * MIB),
           "scratch_bytes": int(got["compute"] * MIB)}
    out["total_bytes"] = sum(out.values())
    return out


def zinc_memory(health=None, bench_results=None):
    """zinc's device_memory object from a /health body or the first `zinc bench --json` record
    that has one; None when neither says (CPU tier, or an older zinc)."""
    if isinstance(health, dict) and isinstance(health.get("device_memory"), dict):
        return dict(health["device_memory"])
    for r in bench_results or []:
        if isinstance(r, dict) and isinstance(r.get("device_memory"), dict):
            return dict(r["device_memory"])
    return None


def _smi(args):
    if not shutil.which("nvidia-smi"):
        return None
    try:
        p = subprocess.run(["nvidia-smi"] + args, capture_output=True, text=True, timeout=15)
        return p.stdout if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def gpu_used_bytes():
    """Used memory of GPU 0 in bytes (nvidia-smi), None without one."""
    out = _smi(["--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"])
    try:
        return int(float(out.strip().splitlines()[0])) * MIB if out else None
    except (ValueError, IndexError):
        return None


def process_used_bytes(pids):
    """Sum of the used GPU memory nvidia-smi lists for these pids (None when it lists none of
    them: in a container it may not see them)."""
    out = _smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    if not out:
        return None
    tot, found = 0, False
    for ln in out.strip().splitlines():
        parts = [p.strip() for p in ln.split(",")]
        try:
            if len(parts) == 2 and int(parts[0]) in pids:
                tot += int(float(parts[1])) * MIB
                found = True
        except ValueError:
            continue
    return tot if found else None


def driver_view(pids, baseline_bytes):
    """{'bytes', 'method'} of what the driver says the engine uses, or None."""
    b = process_used_bytes(set(pids))
    if b is not None:
        return {"bytes": b, "method": "nvidia-smi, the server's process"}
    used = gpu_used_bytes()
    if used is not None and baseline_bytes is not None:
        return {"bytes": max(0, used - baseline_bytes),
                "method": "nvidia-smi, device used minus the idle baseline"}
    return None


def entry(engine, phase, slots, ctx_per_seq, reported, driver):
    """One row of the memory table."""
    return {"engine": engine, "phase": phase, "slots": slots, "ctx_per_seq": ctx_per_seq,
            "reported": reported, "driver": driver}


def gib(b):
    return "-" if b is None else f"{b / (1 << 30):.2f}"


def memory_table(res):
    rows = res.get("device_memory") or []
    if not rows:
        return []
    lines = ["", "## Device memory", "",
             "What each engine holds on the GPU, in GiB. zinc: its CUDA runner's own count "
             "(weights as uploaded, KV pool, scratch = activations, RoPE tables, dequantized-"
             "weight and split-K buffers; not cuBLAS's workspace). llama.cpp: its log's CUDA "
             "model / KV / compute buffer sizes. Driver: nvidia-smi at the end of the phase.", "",
             "| phase | engine | slots x ctx | weights | KV pool | scratch / compute | total "
             "reported | driver (nvidia-smi) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        rep = r.get("reported") or {}
        drv = r.get("driver") or {}
        lines.append(f"| {r['phase']} | {r['engine']} | {r['slots']} x {r['ctx_per_seq']} | "
                     f"{gib(rep.get('weight_bytes'))} | {gib(rep.get('kv_bytes'))} | "
                     f"{gib(rep.get('scratch_bytes'))} | {gib(rep.get('total_bytes'))} | "
                     f"{gib(drv.get('bytes'))} |")
    return lines
