"""The two engines as reusable servers: where their binaries are, how each is started on the same
GGUF with the same context per sequence and the same number of slots, how to tell it is ready,
what version and flags it ran with, and what it said about itself (the runtime evidence line).

zinc:      `zinc serve -m FILE --host H --port P --parallel N --context C [--threads T]
           [--no-prefix-cache]`, flags checked against `zinc serve --help` so a missing option is
           reported instead of silently dropped.
llama.cpp: `llama-server -m FILE --host H --port P -c C*N -np N -t T -tb T --jinja` (its -c is the
           total KV size, split evenly over the N slots unless --kv-unified; the per-slot context
           it really used is read back from its log, `n_ctx_slot = ...`). On CUDA: -ngl 999.
"""
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import asyncio

from . import client

ROOT = Path(__file__).resolve().parents[2]

# Lines of a server's log kept as its runtime evidence: what tier/backend it ran on.
EVIDENCE_RE = re.compile(r"evidence|tier|backend|fallback|CUDA|cuda|GPU|AVX|simd|kernels", re.I)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_text(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"<{e}>"


def find_zinc(build_dirs):
    for d in build_dirs:
        p = Path(d) / "zinc"
        if p.exists():
            return p
    return None


def llama_bin_dir(target):
    return ROOT / "build-peer" / ("build-cuda" if target == "cuda" else "build") / "bin"


def build_llama(target, jobs, log):
    """Run scripts/build-llama-cpp (idempotent) for the target; raises on failure."""
    cmd = [str(ROOT / "scripts" / "build-llama-cpp"), "--jobs", str(jobs)]
    if target == "cuda":
        cmd.append("--cuda")
        src = os.environ.get("ZINC_LLAMA_SRC")
        if src:
            cmd += ["--src", src]
    log(f"building llama.cpp: {' '.join(cmd)}")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"build-llama-cpp failed ({p.returncode}): {p.stderr[-2000:]}")


def build_zinc(build_dir, jobs, log, cuda=False):
    """Configure (once) and build the zinc target in build_dir."""
    build_dir = Path(build_dir)
    if not (build_dir / "CMakeCache.txt").exists():
        cfg = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
        if cuda:
            cfg.append("-DZINC_CUDA=ON")
        log(f"configuring zinc: {' '.join(cfg)}")
        subprocess.run(cfg, check=True, capture_output=True)
    log(f"building zinc in {build_dir}")
    p = subprocess.run(["cmake", "--build", str(build_dir), "-j", str(jobs), "--target", "zinc"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"zinc build failed: {p.stdout[-1500:]}{p.stderr[-1500:]}")


class Server:
    """One running server process. start() returns once GET /health answers 200 (or raises with
    the log's tail); stop() ends its process group. Use as a context manager."""

    def __init__(self, name, argv, port, log_path, env=None, nice=0):
        self.name, self.argv, self.port, self.log_path = name, argv, port, Path(log_path)
        self.env, self.nice = env, nice
        self.proc = None
        self.base_url = f"http://127.0.0.1:{port}"
        self.health = None
        self.model_id = None

    def _preexec(self):
        os.setsid()
        if self.nice:
            try:
                with open("/proc/self/autogroup", "w") as f:
                    f.write(str(self.nice))
            except OSError:
                pass
            try:
                os.nice(self.nice)
            except OSError:
                pass

    def start(self, timeout_s=600):
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     preexec_fn=self._preexec)
        deadline = time.monotonic() + timeout_s
        status = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) while starting: "
                                   f"{self.log_tail()}")
            status, body = asyncio.run(self._health())
            if status == 200:
                self.health = body
                self.model_id = self._model_id()
                return self
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"{self.name} not ready after {timeout_s} s (last /health status "
                           f"{status}): {self.log_tail()}")

    def _model_id(self):
        """The id GET /v1/models lists first (servers may insist on it in the `model` field)."""
        async def get():
            async with client.new_session(1) as s:
                return await client.get_json(s, self.base_url, "/v1/models", timeout_s=5)
        status, body = asyncio.run(get())
        try:
            return body["data"][0]["id"]
        except (TypeError, KeyError, IndexError):
            return None

    async def _health(self):
        async with client.new_session(1) as s:
            return await client.get_json(s, self.base_url, "/health", timeout_s=2)

    def fetch_health(self):
        status, body = asyncio.run(self._health())
        return body if status == 200 else None

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=1500):
        return self.log_text()[-n:]

    def metrics_text(self):
        async def get():
            async with client.new_session(1) as s:
                try:
                    async with s.get(self.base_url + "/metrics") as r:
                        return await r.text() if r.status == 200 else ""
                except Exception:
                    return ""
        return asyncio.run(get())

    def evidence(self):
        """What the server says about the tier/backend it runs on: matching log lines (zinc's
        evidence line, llama.cpp's system info and backend lines) and zinc's
        `zinc_evidence_info{execution_tier=...}` series from GET /metrics; at most 20 lines."""
        lines = [ln.strip() for ln in self.log_text().splitlines() if EVIDENCE_RE.search(ln)]
        if self.proc and self.proc.poll() is None:
            lines += [ln.strip() for ln in self.metrics_text().splitlines()
                      if ln.startswith("zinc_evidence_info") or "execution_tier" in ln
                      and not ln.startswith("#")]
        return lines[:20]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class EngineSpec:
    """How to start one engine's server and what it is."""

    def __init__(self, name, server_bin, bench_bin, target):
        self.name, self.server_bin, self.bench_bin = name, server_bin, bench_bin
        self.target = target

    def version(self):
        raise NotImplementedError

    def server_argv(self, model, port, ctx_per_seq, slots, threads, prefix_cache=True):
        raise NotImplementedError

    def actual_ctx_per_seq(self, log_text, requested):
        return requested


class ZincSpec(EngineSpec):
    def version(self):
        return run_text([str(self.server_bin), "--version"])

    def serve_help(self):
        return run_text([str(self.server_bin), "serve", "--help"])

    def has_serve(self):
        h = self.serve_help()
        return "--parallel" in h or "--port" in h

    def server_argv(self, model, port, ctx_per_seq, slots, threads, prefix_cache=True):
        h = self.serve_help()
        argv = [str(self.server_bin), "serve", "-m", str(model), "--host", "127.0.0.1",
                "--port", str(port), "--parallel", str(slots), "--context", str(ctx_per_seq)]
        if threads and "--threads" in h:
            argv += ["--threads", str(threads)]
        if not prefix_cache:
            if "--no-prefix-cache" not in h:
                raise RuntimeError("zinc serve has no --no-prefix-cache option")
            argv.append("--no-prefix-cache")
        return argv


class LlamaSpec(EngineSpec):
    def version(self):
        return run_text([str(self.server_bin or self.bench_bin), "--version"])

    def server_argv(self, model, port, ctx_per_seq, slots, threads, prefix_cache=True):
        argv = [str(self.server_bin), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                "-c", str(ctx_per_seq * slots), "-np", str(slots), "--jinja", "--no-webui"]
        if threads:
            argv += ["-t", str(threads), "-tb", str(threads)]
        if self.target == "cuda":
            argv += ["-ngl", "999"]
        if not prefix_cache:
            # llama.cpp's prompt cache is per request (cache_prompt: false in the body); the
            # host-memory prompt cache is also turned off.
            argv += ["--cache-ram", "0"]
        return argv

    def actual_ctx_per_seq(self, log_text, requested):
        m = re.search(r"n_ctx_slot\s*=\s*(\d+)", log_text)
        return int(m.group(1)) if m else None
