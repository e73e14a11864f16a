#!/usr/bin/env python3
"""tests/fuzz/make_gguf_seeds.py — write the GGUF fuzz seed corpus (tests/fuzz/corpus/gguf/).

Small valid files (v2 and v3, every value type, nested arrays, custom alignment, several tensor
types) and near-valid ones (one field off), packed by hand with `struct` so the seeds do not
depend on zinc's own writer. The output is deterministic; the seeds are committed, and this script
is how to regenerate them:  python3 tests/fuzz/make_gguf_seeds.py
"""

import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus" / "gguf"

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
       U64: "<Q", I64: "<q", F64: "<d"}
# ggml type -> (block size, bytes per block)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml_type)] with deterministic data."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + value(t, v)
    offset, blobs = 0, []
    for i, (name, ne, gt) in enumerate(tensors):
        bs, ts = TYPES[gt]
        rows = 1
        for n in ne[1:]:
            rows *= n
        nbytes = ne[0] // bs * ts * rows
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gt, offset)
        blobs.append(bytes((i * 7 + j * 13) & 0xFF for j in range(nbytes)))
        offset += (nbytes + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for b in blobs:
        out += b + b"\0" * (-len(b) % alignment)
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    base_kv = [("general.architecture", STR, "llama"), ("llama.block_count", U32, 1),
               ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "b"])),
               ("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, -2.0]))]
    base_t = [("norm.weight", [8], 0), ("blk.0.q4_0", [64, 2], 2), ("blk.0.q8_0", [32, 3], 8)]
    all_types = [(f"t{gt}", [256, 1], gt) for gt in sorted(TYPES)]
    every_value = [("u8", U8, 255), ("i8", I8, -1), ("u16", U16, 65535), ("i16", I16, -2),
                   ("u32", U32, 7), ("i32", I32, -7), ("f32", F32, 1.5), ("bool", BOOL, 1),
                   ("str", STR, "héllo"), ("u64", U64, 2**64 - 1), ("i64", I64, -2**63),
                   ("f64", F64, 2.5), ("empty", ARR, (I32, [])),
                   ("nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x"]), (ARR, [(F64, [1.0])])]))]
    seeds = {
        "valid_v3.gguf": gguf(base_kv, base_t),
        "valid_v2.gguf": gguf(base_kv, base_t, version=2),
        "every_value_type.gguf": gguf(every_value, []),
        "every_tensor_type.gguf": gguf([], all_types),
        "align_64.gguf": gguf([("general.alignment", U32, 64)] + base_kv, base_t, alignment=64),
        "align_1.gguf": gguf([("general.alignment", U32, 1)], base_t, alignment=1),
        "header_only.gguf": gguf([], []),
        "4d_tensor.gguf": gguf([], [("x", [32, 2, 3, 4], 8)]),
    }
    v = bytearray(seeds["valid_v3.gguf"])
    near = {
        "near_version1.gguf": v[:4] + struct.pack("<I", 1) + v[8:],
        "near_truncated_data.gguf": v[:-40],
        "near_truncated_meta.gguf": v[:60],
        "near_bad_alignment.gguf": gguf([("general.alignment", U32, 48)], base_t),
        "near_alignment_u64.gguf": gguf([("general.alignment", U64, 32)], base_t),
        "near_dup_key.gguf": gguf([("k", U32, 1), ("k", U32, 2)], []),
        "near_unknown_type.gguf": gguf([], [("w", [32], 8)]).replace(
            struct.pack("<IQ", 8, 0), struct.pack("<IQ", 99, 0), 1),
        "near_deep_nesting.gguf": gguf([("deep", ARR, (ARR, [(ARR, [(ARR, [(ARR, [(ARR, [
            (ARR, [(ARR, [(ARR, [(U8, [1])])])])])])])])]))], []),
    }
    seeds.update({k: bytes(b) for k, b in near.items()})
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
