"""zinc's GGUF reader against the `gguf` pip package (an implementation nobody here wrote).

- Real models: every metadata key, type and value, and every tensor's name, type, shape, data
  offset, byte size and data bytes (first/last 8) must match gguf.GGUFReader.
- Synthetic files written by gguf.GGUFWriter (all scalar types, string and nested arrays, several
  tensor types, custom alignment): zinc must read back exactly what was written.
- Malformed files: the tool exits with status 2 and one line naming the file and a byte offset.

The C++ side is tests/tools/gguf_dump.cpp (JSON; strings as hex of raw bytes).
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build"))
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
DUMP = BUILD / "gguf_dump"
MODELS = [SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
          SOURCE / "models" / "gemma-3-270m-q4_k_m.gguf"]

VT = gguf.GGUFValueType


def dump(path):
    if not DUMP.exists():
        pytest.skip(f"{DUMP} not built")
    r = subprocess.run([str(DUMP), str(path)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def unhex(s):
    return bytes.fromhex(s)


def decode_value(v, vtype):
    """Turn the dump's JSON value back into Python values (strings -> bytes)."""
    if vtype == VT.STRING:
        return unhex(v)
    if isinstance(v, list):
        return [decode_value(x, VT.STRING) if isinstance(x, str) else
                (decode_value(x, VT.ARRAY) if isinstance(x, list) else x) for x in v]
    return v


def reader_value(field):
    """The value of a GGUFReader field, strings as bytes (no UTF-8 decoding)."""
    main = field.types[0]
    if main == VT.STRING:
        return bytes(field.parts[-1].tobytes())
    if main == VT.ARRAY:
        sub = field.types[-1]
        if sub == VT.STRING:
            return [bytes(field.parts[i].tobytes()) for i in field.data]
        return [x for i in field.data for x in field.parts[i].tolist()]
    return field.parts[-1].tolist()[0]


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_real_model_matches_ggufreader(model):
    if not model.exists():
        pytest.skip(f"{model} missing (run scripts/fetch-models)")
    compare_with_ggufreader(model)


SEEDS = sorted(p for p in (SOURCE / "tests" / "fuzz" / "corpus" / "gguf").glob("*.gguf")
               if not p.name.startswith("near_"))


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.name)
def test_valid_fuzz_seeds_match_ggufreader(seed):
    compare_with_ggufreader(seed)


def compare_with_ggufreader(model):
    ours = dump(model)
    ref = gguf.GGUFReader(str(model))

    # Metadata: GGUFReader also lists the header fields (GGUF.*) first; skip those.
    ref_fields = [f for f in ref.fields.values() if not f.name.startswith("GGUF.")]
    assert [unhex(kv["key"]).decode() for kv in ours["metadata"]] == [f.name for f in ref_fields]
    for kv, f in zip(ours["metadata"], ref_fields):
        assert kv["type"] == int(f.types[0]), f.name
        if len(f.types) > 2:
            assert kv["elem_type"] == VT.ARRAY, f.name
            continue  # GGUFReader flattens nested arrays; the synthetic test below covers them
        if f.types[0] == VT.ARRAY and len(f.types) > 1:  # GGUFReader drops the type of []
            assert kv["elem_type"] == int(f.types[-1]), f.name
        got = decode_value(kv["value"], VT(kv["type"]))
        want = reader_value(f)
        if f.types[0] == VT.ARRAY and f.types[-1] in (VT.FLOAT32, VT.FLOAT64):
            np.testing.assert_array_equal(np.array(got, dtype=np.float64),
                                          np.array(want, dtype=np.float64), err_msg=f.name)
        else:
            assert got == want, f.name

    assert ours["alignment"] == ref.alignment
    assert ours["data_offset"] == ref.data_offset
    assert len(ours["tensors"]) == len(ref.tensors)
    raw = np.memmap(model, dtype=np.uint8, mode="r")
    for t, rt in zip(ours["tensors"], ref.tensors):
        name = unhex(t["name"]).decode()
        assert name == rt.name
        assert t["type"] == int(rt.tensor_type), name
        assert t["ne"] == [int(x) for x in rt.shape], name
        assert t["n_bytes"] == rt.n_bytes, name
        start = ours["data_offset"] + t["offset"]
        assert start == rt.data_offset, name
        k = min(8, rt.n_bytes)
        assert unhex(t["head"]) == bytes(raw[start:start + k]), name
        assert unhex(t["tail"]) == bytes(raw[start + rt.n_bytes - k:start + rt.n_bytes]), name


def test_known_facts_of_real_models():
    smol, gemma = MODELS
    if not smol.exists() or not gemma.exists():
        pytest.skip("models missing")
    s = dump(smol)
    assert len(s["tensors"]) == 272
    g = dump(gemma)
    assert len(g["tensors"]) == 236


def test_synthetic_file_from_ggufwriter(tmp_path):
    path = tmp_path / "synthetic.gguf"
    w = gguf.GGUFWriter(str(path), arch="testarch")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -2**63)
    w.add_float32("t.f32", 0.1)
    w.add_float64("t.f64", -1e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo ✓")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_str", ["a", "", "日本"])
    w.add_array("t.nested", [[1, 2], [3], [4, 5, 6]])
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)          # ne = [5, 3]
    w.add_tensor("a.f32", f32)
    q = rng.integers(0, 256, size=(2, 144 * 2), dtype=np.uint8)   # 2 rows of 512 Q4_K elements
    w.add_tensor("b.q4k", q, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    d = dump(path)
    assert d["alignment"] == 64
    assert d["data_offset"] % 64 == 0
    md = {unhex(kv["key"]).decode(): kv for kv in d["metadata"]}

    def val(k):
        kv = md[k]
        return decode_value(kv["value"], VT(kv["type"]))

    assert val("t.u8") == 200 and md["t.u8"]["type"] == VT.UINT8
    assert val("t.i8") == -100 and md["t.i8"]["type"] == VT.INT8
    assert val("t.u16") == 65000 and md["t.u16"]["type"] == VT.UINT16
    assert val("t.i16") == -32000 and md["t.i16"]["type"] == VT.INT16
    assert val("t.u32") == 4000000000 and md["t.u32"]["type"] == VT.UINT32
    assert val("t.i32") == -2000000000 and md["t.i32"]["type"] == VT.INT32
    assert val("t.u64") == 2**64 - 1 and md["t.u64"]["type"] == VT.UINT64
    assert val("t.i64") == -2**63 and md["t.i64"]["type"] == VT.INT64
    assert val("t.f32") == float(np.float32(0.1)) and md["t.f32"]["type"] == VT.FLOAT32
    assert val("t.f64") == -1e300 and md["t.f64"]["type"] == VT.FLOAT64
    assert val("t.bool") == 1 and md["t.bool"]["type"] == VT.BOOL
    assert val("t.str") == "héllo ✓".encode()
    assert val("t.arr_i32") == [1, -2, 3] and md["t.arr_i32"]["elem_type"] == VT.INT32
    assert val("t.arr_str") == [b"a", b"", "日本".encode()]
    assert md["t.nested"]["elem_type"] == VT.ARRAY
    assert val("t.nested") == [[1, 2], [3], [4, 5, 6]]

    ts = {unhex(t["name"]).decode(): t for t in d["tensors"]}
    assert ts["a.f32"]["ne"] == [5, 3] and ts["a.f32"]["type"] == 0
    assert ts["a.f32"]["n_bytes"] == 60
    assert unhex(ts["a.f32"]["head"]) == f32.tobytes()[:8]
    assert unhex(ts["a.f32"]["tail"]) == f32.tobytes()[-8:]
    assert ts["b.q4k"]["ne"] == [512, 2] and ts["b.q4k"]["type"] == 12
    assert ts["b.q4k"]["n_bytes"] == 2 * 144 * 2
    assert unhex(ts["b.q4k"]["tail"]) == q.tobytes()[-8:]
    for t in d["tensors"]:
        assert (d["data_offset"] + t["offset"]) % 64 == 0


def test_bad_files_exit_2_with_one_line(tmp_path):
    if not DUMP.exists():
        pytest.skip(f"{DUMP} not built")
    cases = {
        "empty.gguf": b"",
        "text.gguf": b"hello, this is not a model file\n",
        "v1.gguf": b"GGUF" + (1).to_bytes(4, "little") + bytes(16),
        "short.gguf": b"GGUF" + (3).to_bytes(4, "little") + bytes(4),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        r = subprocess.run([str(DUMP), str(p)], capture_output=True, timeout=30)
        assert r.returncode == 2, name
        err = r.stderr.decode()
        assert err.count("\n") == 1 and err.startswith(str(p) + ": byte "), err
    r = subprocess.run([str(DUMP), str(tmp_path)], capture_output=True, timeout=30)
    assert r.returncode == 2 and "directory" in r.stderr.decode()
    r = subprocess.run([str(DUMP), str(tmp_path / "missing.gguf")], capture_output=True, timeout=30)
    assert r.returncode == 2 and "No such file" in r.stderr.decode()
