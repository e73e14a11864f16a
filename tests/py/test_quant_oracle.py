"""Oracle tests for zinc's quant library (src/quant), driven through tests/tools/quant_tool.

Oracles, all independent of zinc's code:
  * gguf.quants (numpy) — dequantize for every type it implements, quantize for
    Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/BF16/F16/MXFP4.
  * libggml-base.so from llama-cpp-python (ctypes) — quantize_row_*_ref for every quantized
    type including the K-quants and the Q8_1/Q8_K activation packings, whose scale search
    gguf.quants does not implement.
  * float64 numpy sums for the dot products.
  * the real models in $ZINC_SOURCE_DIR/models, read with gguf.GGUFReader.

Tolerances (docs/quant.md explains them):
  * dequantize: bit-exact (NaN compared by bit pattern). numpy computes in float32 with one
    rounding per multiply/add, exactly as our scalar code does with FMA contraction disabled.
  * quantize: byte-exact against both oracles.
  * dot: |got - exact| <= rtol * sum_i |w_i a_i| (float64), rtol 2e-5 (4e-5 for formats with a
    min term). The integer block sums are exact, so the only error is float32 rounding of the
    per-block scale products and of the accumulation over n / block_size blocks.
"""

import ctypes
import os
import pathlib
import subprocess

import numpy as np
import pytest

from gguf import GGMLQuantizationType as QT
from gguf import GGML_QUANT_SIZES, GGUFReader
from gguf.quants import dequantize as np_dequantize
from gguf.quants import quantize as np_quantize

BUILD = pathlib.Path(os.environ.get("ZINC_BUILD_DIR", "build"))
SOURCE = pathlib.Path(os.environ.get("ZINC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
TOOL = BUILD / "quant_tool"

# zinc type name -> gguf enum
TYPES = {
    "f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16,
    "q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1,
    "q8_0": QT.Q8_0, "q8_1": QT.Q8_1,
    "q2_K": QT.Q2_K, "q3_K": QT.Q3_K, "q4_K": QT.Q4_K, "q5_K": QT.Q5_K, "q6_K": QT.Q6_K,
    "q8_K": QT.Q8_K, "mxfp4": QT.MXFP4,
}
QUANTIZED = [t for t in TYPES if t not in ("f32", "f16", "bf16")]
WEIGHT_TYPES = [t for t in TYPES if t not in ("q8_1", "q8_K")]  # have a vec_dot
NUMPY_DEQUANT = [t for t in TYPES if t not in ("q8_1", "q8_K")]  # gguf.quants lacks these two
NUMPY_QUANT = ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4"]
VEC_DOT_TYPE = {
    "f32": "f32", "f16": "f32", "bf16": "f32",
    "q4_0": "q8_0", "q5_0": "q8_0", "q8_0": "q8_0",
    "q4_1": "q8_1", "q5_1": "q8_1",
    "q2_K": "q8_K", "q3_K": "q8_K", "q4_K": "q8_K", "q5_K": "q8_K", "q6_K": "q8_K",
    "mxfp4": "q8_0",
}
HAS_MIN_TERM = {"q4_1", "q5_1", "q2_K", "q4_K", "q5_K"}


def sizes(name):
    """(block_size, type_size). gguf-py's table lists Q8_1 as 40 bytes (an old layout with f32
    d and s); ggml's block_q8_1 is 36 bytes (f16 d, f16 s, 32 x int8), checked against libggml
    in test_type_traits_match_libggml."""
    if name == "q8_1":
        return 32, 36
    if name == "f32":
        return 1, 4
    if name in ("f16", "bf16"):
        return 1, 2
    return GGML_QUANT_SIZES[TYPES[name]]


def run_tool(*args, data=b"", env=None):
    assert TOOL.exists(), f"{TOOL} not built (set ZINC_BUILD_DIR)"
    p = subprocess.run([str(TOOL), *args], input=data, capture_output=True, env=env)
    assert p.returncode == 0, f"quant_tool {args} failed: {p.stderr.decode()}"
    return p.stdout


def tool_dequant(name, raw):
    return np.frombuffer(run_tool("dequant", name, data=bytes(raw)), dtype=np.float32)


def tool_quant(name, x, simd=True):
    env = None if simd else dict(os.environ, ZINC_SIMD="0")
    return np.frombuffer(run_tool("quant", name, data=np.ascontiguousarray(x, np.float32).tobytes(), env=env),
                         dtype=np.uint8)


def assert_bits_equal(got, want, what):
    """Bit-exact float32 comparison. NaNs compare equal to any NaN: F16C (our fp16 path)
    quiets signalling NaNs, numpy keeps the signalling bit; no finite value is affected."""
    got = np.asarray(got, np.float32).ravel()
    want = np.asarray(want, np.float32).ravel()
    assert got.shape == want.shape, what
    bad = np.nonzero((got.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(got) & np.isnan(want)))[0]
    if bad.size:
        i = bad[0]
        pytest.fail(f"{what}: {bad.size} of {got.size} values differ; first at {i}: "
                    f"got {got[i]!r} want {want[i]!r}")


# ---------------------------------------------------------------------------------------------
# test data

def make_inputs(seed, n_blocks, block):
    """f32 data, one row of n_blocks*block values, mixing hard cases block by block."""
    rng = np.random.default_rng(seed)
    x = np.empty((n_blocks, block), np.float32)
    for b in range(n_blocks):
        kind = b % 10
        scale = float(10.0 ** rng.uniform(-6, 3))
        if kind == 0:
            v = np.zeros(block)                              # all zeros
        elif kind == 1:
            v = np.full(block, rng.normal() * scale)         # constant
        elif kind == 2:
            v = rng.normal(size=block) * 1e-3 * scale        # small with one outlier
            v[rng.integers(block)] = scale * (1 if rng.random() < 0.5 else -1)
        elif kind == 3:
            v = rng.normal(size=block) * 1e-7                # tiny: fp16 scales go subnormal
        elif kind == 4:
            v = rng.uniform(0, 1, size=block) * scale        # all positive
        elif kind == 5:
            v = -rng.uniform(0, 1, size=block) * scale       # all negative
        elif kind == 6:
            v = rng.normal(size=block) * 1000.0              # large
        elif kind == 7:
            v = rng.normal(size=block) * scale
            v[rng.random(block) < 0.5] = 0.0                 # sparse
        else:
            v = rng.standard_t(3, size=block) * scale        # heavy-tailed
        x[b] = v
    return x.ravel()


def random_blocks(name, n_blocks, seed):
    """Raw blocks with random bytes but finite fp16/f32 scale fields (so every bit pattern of
    the quantized payload is exercised)."""
    rng = np.random.default_rng(seed)
    _, ts = sizes(name)
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)

    def put_half(col, lo, hi):
        h = (rng.uniform(lo, hi, size=n_blocks) * rng.choice([-1, 1], size=n_blocks)).astype(np.float16)
        raw[:, col:col + 2] = h.view(np.uint8).reshape(n_blocks, 2)

    if name in ("q4_0", "q5_0", "q8_0"):
        put_half(0, 1e-6, 2.0)
    elif name in ("q4_1", "q5_1", "q8_1"):
        put_half(0, 1e-6, 2.0)
        put_half(2, 1e-6, 2.0)
    elif name in ("q2_K",):
        put_half(ts - 4, 1e-6, 0.1)
        put_half(ts - 2, 1e-6, 0.1)
    elif name in ("q3_K", "q6_K"):
        put_half(ts - 2, 1e-6, 0.1)
    elif name in ("q4_K", "q5_K"):
        put_half(0, 1e-6, 0.1)
        put_half(2, 1e-6, 0.1)
    elif name == "mxfp4":  # E8M0 scale byte: 2^(e - 128) from 2^-28 to 2^11 (every code pattern)
        raw[:, 0] = rng.integers(100, 140, size=n_blocks, dtype=np.uint8)
    elif name == "q8_K":
        raw[:, 0:4] = rng.uniform(1e-6, 0.1, size=n_blocks).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
    return raw


def numpy_dequant(name, raw):
    """Independent numpy decoding; gguf.quants where it has the type, else the two trivial
    activation formats decoded here (d * q)."""
    raw = np.asarray(raw, np.uint8)
    _, ts = sizes(name)
    if name == "q8_1":
        b = raw.reshape(-1, ts)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (b[:, 4:].copy().view(np.int8).astype(np.float32) * d).ravel()
    if name == "q8_K":
        b = raw.reshape(-1, ts)
        d = b[:, 0:4].copy().view(np.float32)
        return (d * b[:, 4:260].copy().view(np.int8).astype(np.float32)).ravel()
    if name == "f32":
        return raw.view(np.float32)
    if name == "f16":
        return raw.view(np.float16).astype(np.float32)
    if name == "bf16":
        return np_dequantize(raw.reshape(-1, 2), QT.BF16).ravel()
    return np_dequantize(raw.reshape(-1, ts), TYPES[name]).ravel()


# ---------------------------------------------------------------------------------------------
# libggml (llama-cpp-python) as the quantize oracle for the formats gguf.quants lacks

def load_libggml():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    libdir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    for cand in ("libggml-base.so", "libggml.so"):
        p = libdir / cand
        if p.exists():
            lib = ctypes.CDLL(str(p))
            if hasattr(lib, "quantize_row_q4_K_ref"):
                return lib
    return None


LIBGGML = load_libggml()


def load_libggml_cpu():
    """llama.cpp's CPU kernels (ggml_vec_dot_*), for a cross-implementation check of vec_dot."""
    if LIBGGML is None:
        return None
    import llama_cpp
    p = pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so"
    if not p.exists():
        return None
    lib = ctypes.CDLL(str(p))
    if hasattr(lib, "ggml_cpu_init"):
        lib.ggml_cpu_init()
    return lib


LIBGGML_CPU = load_libggml_cpu()


def ggml_quant(name, x):
    fn = getattr(LIBGGML, f"quantize_row_{name}_ref")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    x = np.ascontiguousarray(x, np.float32)
    bs, ts = sizes(name)
    out = np.zeros(x.size // bs * ts, np.uint8)
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


# ---------------------------------------------------------------------------------------------
# type table

@pytest.mark.skipif(LIBGGML is None, reason="llama-cpp-python's libggml not available")
def test_type_traits_match_libggml():
    LIBGGML.ggml_blck_size.argtypes = [ctypes.c_int]
    LIBGGML.ggml_blck_size.restype = ctypes.c_int64
    LIBGGML.ggml_type_size.argtypes = [ctypes.c_int]
    LIBGGML.ggml_type_size.restype = ctypes.c_size_t
    lines = run_tool("traits").decode().split("\n")
    rows = [ln.split() for ln in lines if ln.strip()]
    assert len(rows) == len(TYPES)
    for raw, name, bs, ts in rows:
        assert int(raw) == int(TYPES[name]), name
        assert int(bs) == LIBGGML.ggml_blck_size(int(raw)), name
        assert int(ts) == LIBGGML.ggml_type_size(int(raw)), name


# ---------------------------------------------------------------------------------------------
# dequantize

@pytest.mark.parametrize("name", NUMPY_DEQUANT + ["q8_1", "q8_K"])
def test_dequantize_random_bytes_matches_numpy(name):
    if name in ("f32", "f16", "bf16"):
        rng = np.random.default_rng(11)
        raw = rng.integers(0, 256, size=4096 * sizes(name)[1], dtype=np.uint8)
        if name == "f16":  # every half value, plus random ones
            raw = np.concatenate([np.arange(65536, dtype=np.uint16).view(np.uint8), raw])
    else:
        raw = random_blocks(name, 3000, seed=hash(name) % 1000).ravel()
    got = tool_dequant(name, raw)
    want = numpy_dequant(name, raw)
    assert_bits_equal(got, want, f"dequantize {name}")


@pytest.mark.parametrize("name", QUANTIZED)
def test_dequantize_quantized_data_matches_numpy(name):
    bs, _ = sizes(name)
    x = make_inputs(seed=3, n_blocks=max(400, 12800 // bs), block=bs)
    raw = tool_quant(name, x)
    assert_bits_equal(tool_dequant(name, raw), numpy_dequant(name, raw), f"dequantize {name}")


# ---------------------------------------------------------------------------------------------
# quantize

@pytest.mark.parametrize("name", NUMPY_QUANT)
def test_quantize_matches_numpy(name):
    bs, ts = sizes(name)
    x = make_inputs(seed=5, n_blocks=max(500, 16000 // bs), block=max(bs, 32))
    got = tool_quant(name, x)
    want = np_quantize(x.reshape(-1, max(bs, 32)), TYPES[name]).view(np.uint8).ravel()
    bad = np.nonzero((got.reshape(-1, ts) != want.reshape(-1, ts)).any(axis=1))[0]
    assert bad.size == 0, f"quantize {name}: {bad.size} blocks differ, first {bad[0]}"


@pytest.mark.skipif(LIBGGML is None, reason="llama-cpp-python's libggml not available")
@pytest.mark.parametrize("name", QUANTIZED)
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "ref"])
def test_quantize_matches_libggml(name, simd):
    """Both paths: Q8_0/Q8_1/Q8_K have AVX2 quantizers that must write the reference bytes."""
    bs, ts = sizes(name)
    x = make_inputs(seed=7, n_blocks=max(600, 64000 // bs), block=bs)
    got = tool_quant(name, x, simd=simd)
    want = ggml_quant(name, x)
    bad = np.nonzero((got.reshape(-1, ts) != want.reshape(-1, ts)).any(axis=1))[0]
    assert bad.size == 0, f"quantize {name}: {bad.size} blocks differ from libggml, first {bad[0]}"


# Relative RMS error bound of quantize->dequantize on Gaussian data, per block. These are
# loose upper bounds on the format's precision (about 2x what ggml's reference achieves), so a
# broken scale search or packing fails them while normal rounding never does.
# Values are worst-block errors measured with ggml's reference quantizer on this data, times
# about 1.3. Magnitudes stay >= 0.1 so fp16 scales stay normal (tiny blocks lose precision to
# subnormal fp16 scales by design of the formats; the byte-exact tests cover them).
RT_BOUND = {"q4_0": 0.19, "q4_1": 0.15, "q5_0": 0.10, "q5_1": 0.085, "q8_0": 0.014,
            "q8_1": 0.014, "q2_K": 0.45, "q3_K": 0.24, "q4_K": 0.11, "q5_K": 0.056,
            "q6_K": 0.029, "q8_K": 0.014, "f16": 4.5e-4, "bf16": 3.5e-3, "mxfp4": 0.24}


@pytest.mark.parametrize("name", sorted(RT_BOUND))
def test_roundtrip_error_bound(name):
    bs, _ = sizes(name)
    bs = max(bs, 32)
    rng = np.random.default_rng(13)
    x = (rng.normal(size=(2000, bs)) * 10.0 ** rng.uniform(-1, 3, size=(2000, 1))).astype(np.float32)
    y = tool_dequant(name, tool_quant(name, x.ravel())).reshape(x.shape)
    rel = np.sqrt(((y - x) ** 2).mean(axis=1)) / np.sqrt((x ** 2).mean(axis=1))
    assert rel.max() <= RT_BOUND[name], f"{name}: worst block relative RMS error {rel.max():.4f}"


def test_roundtrip_exact_cases():
    # zeros stay zeros in every format; Q8_0 represents multiples of amax/127 it produced.
    for name in QUANTIZED:
        bs, _ = sizes(name)
        z = np.zeros(bs * 4, np.float32)
        assert not tool_dequant(name, tool_quant(name, z)).any(), name


# ---------------------------------------------------------------------------------------------
# dot products

def dot_case(name, n, rows, seed, source):
    rng = np.random.default_rng(seed)
    if name in ("f32", "f16", "bf16") or source == "quantized":
        w_f = (rng.normal(size=(rows, n)) * 10.0 ** rng.uniform(-2, 1, size=(rows, 1))).astype(np.float32)
        w_raw = tool_quant(name, w_f.ravel())
    else:
        w_raw = random_blocks(name, rows * n // sizes(name)[0], seed).ravel()
    a = (rng.normal(size=(rows, n)) * 10.0 ** rng.uniform(-2, 2, size=(rows, 1))).astype(np.float32)
    a[0, : n // 4] = 0.0  # partly zero activations
    out = run_tool("dot", name, str(n), str(rows), data=bytes(w_raw) + a.tobytes())
    vdt = VEC_DOT_TYPE[name]
    bs_a, ts_a = sizes(vdt)
    packed_len = rows * (n // bs_a) * ts_a
    packed = np.frombuffer(out[:packed_len], np.uint8)
    simd = np.frombuffer(out[packed_len:packed_len + 4 * rows], np.float32)
    ref = np.frombuffer(out[packed_len + 4 * rows:], np.float32)
    w = numpy_dequant(name, np.asarray(w_raw)).astype(np.float64).reshape(rows, n)
    act = numpy_dequant(vdt, packed).astype(np.float64).reshape(rows, n)
    return w, act, a, simd, ref, np.asarray(w_raw), packed


def exact_dot(name, w, act, w_raw, packed, rows, n):
    """float64 oracle. For Q4_1/Q5_1 x Q8_1 the format defines the min term through the stored
    activation sum s = fp16(d_a * sum q_a), not through the dequantized activations, so the
    oracle uses s: sum_b [d_w d_a sum q_w q_a + m_w s_a]."""
    exact = (w * act).sum(axis=1)
    if name in ("q4_1", "q5_1"):
        _, ts_w = sizes(name)
        wb = w_raw.reshape(-1, ts_w)
        m_w = wb[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(rows, -1)
        ab = packed.reshape(-1, 36)
        d_a = ab[:, 0:2].copy().view(np.float16).astype(np.float64).reshape(rows, -1)
        s_a = ab[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(rows, -1)
        q_a = ab[:, 4:].copy().view(np.int8).astype(np.float64).reshape(rows, -1, 32).sum(axis=2)
        exact = exact + (m_w * (s_a - d_a * q_a)).sum(axis=1)
    return exact


@pytest.mark.parametrize("name", WEIGHT_TYPES)
@pytest.mark.parametrize("n", [256, 768, 4096])
@pytest.mark.parametrize("source", ["quantized", "random_bytes"])
def test_vec_dot_matches_float64(name, n, source):
    rows = 12
    w, act, a_f32, simd, ref, w_raw, packed = dot_case(name, n, rows, seed=n + len(name), source=source)
    exact = exact_dot(name, w, act, w_raw, packed, rows, n)
    scale = np.abs(w * act).sum(axis=1)
    rtol = 4e-5 if name in HAS_MIN_TERM else 2e-5
    for label, got in (("vec_dot", simd), ("vec_dot_ref", ref)):
        err = np.abs(got.astype(np.float64) - exact)
        worst = int(np.argmax(err / np.maximum(scale, 1e-30)))
        assert np.all(err <= rtol * scale + 1e-30), (
            f"{label} {name} n={n} row {worst}: got {got[worst]} want {exact[worst]} "
            f"(|err| {err[worst]:.3g} > {rtol} * {scale[worst]:.3g})")
    # the packed activation must be what the activation quantizer produces (checked against
    # libggml elsewhere); here check it approximates the f32 activation it came from.
    if VEC_DOT_TYPE[name] != "f32":
        amax = np.abs(a_f32).max(axis=1, keepdims=True)
        # half a step, plus the fp16 rounding of the block scale times the largest level
        assert np.all(np.abs(act - a_f32) <= amax / 127 * (0.5 + 127 * 2.0 ** -11) * 1.001)


@pytest.mark.skipif(LIBGGML_CPU is None, reason="llama-cpp-python's libggml-cpu not available")
@pytest.mark.parametrize("name", [t for t in WEIGHT_TYPES if t not in ("f32", "f16", "bf16")])
def test_vec_dot_matches_libggml_kernel(name):
    """Same weight bytes and the same packed activation bytes through llama.cpp's own kernel:
    both are float32 sums of exact integer block dots, so they agree to rounding."""
    n, rows = 1024, 12
    w, act, a_f32, simd, ref, w_raw, packed = dot_case(name, n, rows, seed=99, source="quantized")
    fn = getattr(LIBGGML_CPU, f"ggml_vec_dot_{name}_{VEC_DOT_TYPE[name]}")
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_void_p,
                   ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = None
    w_rows = np.ascontiguousarray(w_raw).reshape(rows, -1)
    a_rows = np.ascontiguousarray(packed).reshape(rows, -1)
    scale = np.abs(w * act).sum(axis=1)
    for r in range(rows):
        out = ctypes.c_float()
        fn(n, ctypes.byref(out), 0, w_rows[r].ctypes.data, 0, a_rows[r].ctypes.data, 0, 1)
        assert abs(float(simd[r]) - out.value) <= 2e-5 * scale[r], (name, r, simd[r], out.value)


def test_simd_switch_env():
    env = dict(os.environ, ZINC_SIMD="0")
    assert run_tool("info", env=env).decode().startswith("simd=0")
    env = dict(os.environ, ZINC_AVX512="0")
    info = run_tool("info", env=env).decode()
    assert "level=avx2" in info or "level=ref" in info, info


@pytest.mark.parametrize("name", [t for t in WEIGHT_TYPES if t not in ("f32", "f16", "bf16")])
def test_avx512_switch_is_bit_identical(name):
    """ZINC_AVX512=0 (AVX2 kernels) and the default (AVX-512 VNNI where the CPU has it) give the
    same bytes: same packed activations, same dot results, bit for bit."""
    n, rows = 768 if sizes(name)[0] == 256 else 800, 6
    rng = np.random.default_rng(5)
    w = tool_quant(name, rng.normal(size=rows * n).astype(np.float32))
    a = rng.normal(size=(rows, n)).astype(np.float32)
    data = bytes(w) + a.tobytes()
    default = run_tool("dot", name, str(n), str(rows), data=data)
    avx2 = run_tool("dot", name, str(n), str(rows), data=data, env=dict(os.environ, ZINC_AVX512="0"))
    assert default == avx2


# ---------------------------------------------------------------------------------------------
# real models

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]


@pytest.mark.parametrize("model", MODELS)
def test_real_model_tensors_dequantize_like_numpy(model):
    path = SOURCE / "models" / model
    assert path.exists(), f"missing model {path}"
    reader = GGUFReader(str(path))
    by_type = {}  # zinc type name -> list of raw row bytes
    seen = set()
    for t in reader.tensors:
        name = t.tensor_type.name.lower().replace("_k", "_K")
        assert name in TYPES, f"{t.name}: unexpected tensor type {t.tensor_type.name}"
        seen.add(name)
        data = np.asarray(t.data)
        rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
        idx = np.unique(np.linspace(0, rows.shape[0] - 1, num=min(6, rows.shape[0])).astype(int))
        for i in idx:
            by_type.setdefault(name, []).append((t.name, rows[i].view(np.uint8).tobytes()))
    for name, items in by_type.items():
        raw = b"".join(r for _, r in items)
        got = tool_dequant(name, np.frombuffer(raw, np.uint8))
        want = numpy_dequant(name, np.frombuffer(raw, np.uint8))
        assert_bits_equal(got, want, f"{model}: {name} rows of {len(items)} tensors")
    assert seen, "no tensors read"


@pytest.mark.parametrize("model", MODELS)
def test_real_model_rows_vec_dot(model):
    """A few rows of every weight type in the model through vec_dot vs float64."""
    reader = GGUFReader(str(SOURCE / "models" / model))
    done = set()
    for t in reader.tensors:
        name = t.tensor_type.name.lower().replace("_k", "_K")
        if name in done or name == "f32" or len(t.shape) < 2:
            continue
        done.add(name)
        data = np.asarray(t.data)
        rows = data.reshape(-1, data.shape[-1])[:8]
        n = int(t.shape[0])
        rng = np.random.default_rng(1)
        a = rng.normal(size=(rows.shape[0], n)).astype(np.float32)
        out = run_tool("dot", name, str(n), str(rows.shape[0]), data=rows.tobytes() + a.tobytes())
        vdt = VEC_DOT_TYPE[name]
        bs_a, ts_a = sizes(vdt)
        plen = rows.shape[0] * (n // bs_a) * ts_a
        act = numpy_dequant(vdt, np.frombuffer(out[:plen], np.uint8)).astype(np.float64).reshape(-1, n)
        simd = np.frombuffer(out[plen:plen + 4 * rows.shape[0]], np.float32)
        w = numpy_dequant(name, rows.ravel()).astype(np.float64).reshape(-1, n)
        exact = exact_dot(name, w, act, rows.ravel(), np.frombuffer(out[:plen], np.uint8),
                          rows.shape[0], n)
        scale = np.abs(w * act).sum(axis=1)
        rtol = 4e-5 if name in HAS_MIN_TERM else 2e-5
        assert np.all(np.abs(simd - exact) <= rtol * scale), f"{model} {t.name} ({name})"
    assert done
