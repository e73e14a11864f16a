"""A small GGUF (v2/v3) header reader for bench/run: the metadata key/values and each tensor's
name, type and byte size, read from the file's header without touching the tensor data. The
benchmark needs it on the GPU machine, which has no `gguf` pip package; tests compare it with the
`gguf` package's GGUFReader (tests/py/test_bench_harness.py).

Format (ggml's docs/gguf.md): magic "GGUF", u32 version, u64 tensor count, u64 kv count; each kv
is a string key, a u32 value type and the value (arrays: u32 element type, u64 count, elements);
each tensor info is a string name, u32 n_dims, n_dims x u64 dims, u32 ggml type, u64 offset.
Strings are u64 length + bytes. Little-endian throughout.
"""
import struct

# GGUF metadata value types: (struct format, size) for the scalars; 8 = string, 9 = array.
_SCALAR = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
           6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
STRING, ARRAY = 8, 9

# ggml type id -> (elements per block, bytes per block), from ggml.h / ggml.c's type traits
# (Q8_1, id 9, is left out: an activation format, never stored, whose size changed in ggml).
GGML_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
              8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144),
              13: (256, 176), 14: (256, 210), 15: (256, 292), 24: (1, 1), 25: (1, 2),
              26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}


class GGUFHeaderError(ValueError):
    pass


class _Reader:
    def __init__(self, f):
        self.f = f

    def read(self, n):
        b = self.f.read(n)
        if len(b) != n:
            raise GGUFHeaderError(f"truncated header at byte {self.f.tell()}: wanted {n} bytes")
        return b

    def u32(self):
        return struct.unpack("<I", self.read(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.read(8))[0]

    def string(self):
        n = self.u64()
        if n > (1 << 30):
            raise GGUFHeaderError(f"string of {n} bytes at byte {self.f.tell()}")
        return self.read(n).decode("utf-8", errors="replace")

    def value(self, vtype, keep_arrays):
        if vtype in _SCALAR:
            fmt, size = _SCALAR[vtype]
            return struct.unpack(fmt, self.read(size))[0]
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, n = self.u32(), self.u64()
            if not keep_arrays and etype in _SCALAR:  # skip big arrays (token scores, types)
                self.f.seek(_SCALAR[etype][1] * n, 1)
                return {"array_of": etype, "len": n}
            items = [self.value(etype, keep_arrays) for _ in range(n)]
            return items if keep_arrays else {"array_of": etype, "len": n}
        raise GGUFHeaderError(f"unknown metadata value type {vtype} at byte {self.f.tell()}")


def tensor_nbytes(ggml_type, dims):
    if ggml_type not in GGML_TYPES:
        raise GGUFHeaderError(f"ggml type {ggml_type} not in bench's size table")
    per_block, block_bytes = GGML_TYPES[ggml_type]
    n = 1
    for d in dims:
        n *= d
    return n // per_block * block_bytes


def read_header(path, keep_arrays=False):
    """{"version", "kv": {key: value}, "tensors": [{"name", "type", "dims", "n_bytes"}]}; arrays
    in kv are summarised as {"array_of", "len"} unless keep_arrays. Raises GGUFHeaderError."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if r.read(4) != b"GGUF":
            raise GGUFHeaderError(f"{path}: not a GGUF file (magic)")
        version = r.u32()
        if version not in (2, 3):
            raise GGUFHeaderError(f"{path}: GGUF version {version}, expected 2 or 3")
        n_tensors, n_kv = r.u64(), r.u64()
        kv = {}
        for _ in range(n_kv):
            key = r.string()
            kv[key] = r.value(r.u32(), keep_arrays)
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.u64() for _ in range(r.u32())]
            t = r.u32()
            r.u64()  # offset
            tensors.append({"name": name, "type": t, "dims": dims,
                            "n_bytes": tensor_nbytes(t, dims)})
    return {"version": version, "kv": kv, "tensors": tensors}
