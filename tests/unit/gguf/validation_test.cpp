// tests/unit/gguf/validation_test.cpp — every malformed-file class the reader must reject, each
// built with the Writer plus byte-level corruption, checking the file name, the exact byte offset
// of the faulty field, and what the message says was found and expected.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace zinc::gguf::testing {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

TEST(GgufHeader, BadMagic) {
    Bytes b = sample_writer().serialize();
    b[0] = 'X';
    expect_error(b, 0, {"bad magic 'XGUF'", "expected 'GGUF'"});
    const std::string text = "#!/bin/sh\necho hello\n";
    expect_error(Bytes(text.begin(), text.end()), 0, {"bad magic '#!/b'"});
    expect_error(Bytes{'a', 'b', 'c', 'd'}, 0, {"bad magic 'abcd'"});
}

TEST(GgufHeader, UnsupportedVersions) {
    Bytes b = sample_writer().serialize();
    put<uint32_t>(b, 4, 1);
    expect_error(b, 4, {"unsupported GGUF version 1", "obsolete", "expected 2 or 3"});
    put<uint32_t>(b, 4, 4);
    expect_error(b, 4, {"unsupported GGUF version 4", "expected 2 or 3"});
    put<uint32_t>(b, 4, 0);
    expect_error(b, 4, {"unsupported GGUF version 0"});
    put<uint32_t>(b, 4, 0x03000000);
    expect_error(b, 4, {"big-endian", "expected 2 or 3"});
}

TEST(GgufHeader, TruncatedHeader) {
    const Bytes full = sample_writer().serialize();
    for (size_t n : {0, 3, 4, 10, 23}) {
        Bytes b(full.begin(), full.begin() + n);
        expect_error(b, 0, {"truncated: file is " + std::to_string(n) + " bytes", "needs 24"});
    }
}

TEST(GgufHeader, AbsurdCounts) {
    Bytes b = sample_writer().serialize();
    put<uint64_t>(b, 16, uint64_t{1} << 60);
    expect_error(b, 16,
                 {"metadata count 1152921504606846976 needs at least 14987979559889010688 bytes",
                  "but only " + std::to_string(b.size() - 24) + " bytes are left at byte 24",
                  "expected a count that fits the file"});
    put<uint64_t>(b, 16, kMaxU64);
    expect_error(b, 16, {"metadata count 18446744073709551615 needs at least 2^64 bytes"});
    b = sample_writer().serialize();
    put<uint64_t>(b, 8, uint64_t{1} << 40);
    const size_t infos_at = string_length_at(b, "norm.weight");
    expect_error(b, 8, {"tensor count 1099511627776 needs at least",
                        "bytes are left at byte " + std::to_string(infos_at)});
}

TEST(GgufMetadata, KeyLengthPastTheEnd) {
    Bytes b = sample_writer().serialize();
    const size_t at = string_length_at(b, "general.architecture");
    ASSERT_EQ(at, 24u);
    put<uint64_t>(b, at, kMaxU64);
    expect_error(b, 24, {"metadata key #0 key length 18446744073709551615 exceeds the " +
                         std::to_string(b.size() - 32) + " bytes left in the file"});
}

TEST(GgufMetadata, EmptyAndDuplicateKeys) {
    Writer w;
    w.add_kv("a", OwnedValue::u32(1));
    w.add_kv("", OwnedValue::u32(2));
    expect_error(w.serialize(), 24 + 8 + 1 + 4 + 4, {"metadata key #1 has an empty key"});

    Writer d;
    d.add_kv("dup", OwnedValue::u32(1));
    d.add_kv("other", OwnedValue::string("x"));
    d.add_kv("dup", OwnedValue::u32(2));
    const size_t third = 24 + (8 + 3 + 4 + 4) + (8 + 5 + 4 + 8 + 1);
    expect_error(d.serialize(), third,
                 {"metadata key #2 'dup' duplicates key #0", "expected unique keys"});
}

TEST(GgufMetadata, SmallestFileWithAnEmptyKeyNamesTheKey) {
    // 37 bytes: header (24), key length 0 (8), type u8 (4), value (1). The count check must not
    // preempt the precise error (issue 13).
    Bytes b(24 + 8 + 4 + 1, 0);
    const char magic[4] = {'G', 'G', 'U', 'F'};
    std::copy(magic, magic + 4, b.begin());
    put<uint32_t>(b, 4, 3);
    put<uint64_t>(b, 8, 0);
    put<uint64_t>(b, 16, 1);
    put<uint64_t>(b, 24, 0);                                        // key length 0
    put<uint32_t>(b, 32, static_cast<uint32_t>(ValueType::UINT8));  // value type
    b[36] = 7;
    ASSERT_EQ(b.size(), 37u);
    expect_error(b, 24, {"metadata key #0 has an empty key", "expected a non-empty name"});
}

TEST(GgufMetadata, KeysMustBeUtf8WithoutControlCharacters) {
    Writer w;
    w.add_kv("general.ok", OwnedValue::u32(1));
    w.add_kv(std::string("ab\xFF\xFE\xC0\xAF", 6), OwnedValue::u32(2));
    const size_t second = 24 + (8 + 10 + 4 + 4);
    expect_error(
        w.serialize(), second + 8 + 2,
        {"metadata key #1 key 'ab\\xff\\xfe\\xc0\\xaf' is not valid UTF-8",
         "byte 2 of the key is '\\xff'", "expected a UTF-8 name without control characters"});
    Writer c;
    c.add_kv("x\x1b[2Jy", OwnedValue::u32(1));
    expect_error(c.serialize(), 24 + 8 + 1, {"contains a control character"});
    Writer u;  // valid UTF-8 beyond ASCII is accepted
    u.add_kv("general.n\xC3\xA4me", OwnedValue::u32(1));
    EXPECT_TRUE(parse(u.serialize()).ok());
}

TEST(GgufTensorInfo, NamesMustBeUtf8) {
    Writer w;
    w.add_kv("general.architecture", OwnedValue::string("llama"));
    w.add_tensor(std::string("bad\xC0name", 8), {4}, quant::GgmlType::F32,
                 std::vector<uint8_t>(16, 0));
    const Bytes b = w.serialize();
    const size_t at = string_length_at(b, std::string("bad\xC0name", 8));
    expect_error(b, at + 8 + 3, {"tensor info #0 name 'bad\\xc0name' is not valid UTF-8"});
}

TEST(GgufMetadata, InvalidValueTypes) {
    Bytes b = sample_writer().serialize();
    const size_t at = after_string(b, "llama.block_count");
    put<uint32_t>(b, at, 13);
    expect_error(b, at, {"metadata key #1 'llama.block_count' has invalid value type 13", "expected 0..12"});

    b = sample_writer().serialize();
    const size_t arr = after_string(b, "tokenizer.ggml.tokens") + 4;
    put<uint32_t>(b, arr, 42);
    expect_error(b, arr, {"'tokenizer.ggml.tokens' has invalid array element type 42"});
}

TEST(GgufMetadata, BoolMustBeZeroOrOne) {
    Writer w;
    w.add_kv("flag", OwnedValue::boolean(true));
    Bytes b = w.serialize();
    const size_t at = after_string(b, "flag") + 4;
    b[at] = 2;
    expect_error(b, at, {"'flag' bool value 2; expected 0 or 1"});
}

TEST(GgufMetadata, StringValueLengthPastTheEnd) {
    Bytes b = sample_writer().serialize();
    const size_t at = string_length_at(b, "llama");
    put<uint64_t>(b, at, 1000000);
    expect_error(b, at, {"metadata key #0 'general.architecture' string length 1000000 exceeds the " +
                         std::to_string(b.size() - at - 8) + " bytes left"});
}

TEST(GgufMetadata, ArrayLengthsAbsurdOrPastTheEnd) {
    Bytes b = sample_writer().serialize();
    const size_t count_at = after_string(b, "tokenizer.ggml.tokens") + 4 + 4;
    put<uint64_t>(b, count_at, kMaxU64);
    expect_error(b, count_at, {"'tokenizer.ggml.tokens' array length 18446744073709551615 of string",
                               "2^64 bytes"});
    put<uint64_t>(b, count_at, 1000);
    expect_error(b, count_at, {"array length 1000 of string needs at least 8000 bytes but only"});

    // An element's string length running past the end names the element.
    Writer w;
    w.add_kv("tokenizer.ggml.tokens", OwnedValue::string_array({"<s>", "zzq"}));
    b = w.serialize();
    const size_t at = string_length_at(b, "zzq");
    put<uint64_t>(b, at, 99999);
    expect_error(b, at, {"'tokenizer.ggml.tokens' element [1] string length 99999 exceeds"});
}

OwnedValue nested(int depth) {
    OwnedValue v = OwnedValue::i32_array({1});
    for (int d = 1; d < depth; ++d) v = OwnedValue::array(ValueType::ARRAY, {v});
    return v;
}

TEST(GgufMetadata, NestingDepthLimit) {
    Writer ok;
    ok.add_kv("deep", nested(8));
    auto r = parse(ok.serialize());
    ASSERT_TRUE(r.ok()) << r.error().message;

    Writer bad;
    bad.add_kv("deep", nested(9));
    const Bytes b = bad.serialize();
    // The 9th array header starts after key, type, and 8 x (elem type + count).
    const size_t at = after_string(b, "deep") + 4 + 8 * 12;
    expect_error(b, at, {"'deep' element [0][0][0][0][0][0][0][0] nests arrays 9 deep", "at most 8"});
}

TEST(GgufMetadata, Alignment) {
    Writer w;
    w.add_kv("general.alignment", OwnedValue::u64(32));
    Bytes b = w.serialize();
    expect_error(b, 24, {"general.alignment has type u64; expected u32"});

    for (uint32_t a : {0u, 3u, 48u}) {
        Writer x;
        x.add_kv("general.alignment", OwnedValue::u32(a));
        expect_error(x.serialize(), 24, {"general.alignment is " + std::to_string(a), "expected a power of two"});
    }
}

TEST(GgufTensorInfo, NDims) {
    for (uint32_t n : {0u, 5u, 0xffffffffu}) {
        Bytes b = sample_writer().serialize();
        const InfoFields f = tensor_info_fields(b, "blk.0.q4");
        put<uint32_t>(b, f.n_dims, n);
        expect_error(b, f.n_dims, {"tensor info #1 'blk.0.q4' has n_dims " + std::to_string(n), "expected 1 to 4"});
    }
}

TEST(GgufTensorInfo, Dimensions) {
    Bytes b = sample_writer().serialize();
    InfoFields f = tensor_info_fields(b, "blk.0.q4");
    put<uint64_t>(b, f.ne0, 0);
    expect_error(b, f.ne0, {"'blk.0.q4' has ne[0] = 0; expected a dimension >= 1"});
    put<uint64_t>(b, f.ne0, 64);
    put<uint64_t>(b, f.ne0 + 8, kMaxU64);  // -1 as i64
    expect_error(b, f.ne0 + 8, {"has ne[1] = -1; expected a dimension >= 1"});

    // Element count overflow: 2^32 * 2^32.
    b = sample_writer().serialize();
    f = tensor_info_fields(b, "blk.0.q8");
    put<uint64_t>(b, f.ne0, uint64_t{1} << 32);
    put<uint64_t>(b, f.ne0 + 8, uint64_t{1} << 32);
    expect_error(b, f.ne0 + 8, {"'blk.0.q8' element count overflows 64 bits at ne[1]"});

    // Byte size overflow: 2^62 f32 elements fit an i64 count but not a byte size.
    b = sample_writer().serialize();
    f = tensor_info_fields(b, "norm.weight");
    put<uint64_t>(b, f.ne0, uint64_t{1} << 62);
    expect_error(b, f.n_dims, {"'norm.weight' byte size overflows"});
}

TEST(GgufTensorInfo, RowLengthMustBeWholeBlocks) {
    Bytes b = sample_writer().serialize();
    const InfoFields f = tensor_info_fields(b, "blk.0.q4");
    put<uint64_t>(b, f.ne0, 65);
    expect_error(b, f.ne0, {"'blk.0.q4' row length ne[0] = 65 is not a multiple of the q4_0 block size 32"});
}

TEST(GgufTensorInfo, UnknownType) {
    for (uint32_t t : {4u, 16u, 99u, 0xffffffffu}) {  // 4: removed Q4_2; 16: IQ2_XXS (unsupported)
        Bytes b = sample_writer().serialize();
        const InfoFields f = tensor_info_fields(b, "blk.0.q8");
        put<uint32_t>(b, f.type, t);
        expect_error(b, f.type, {"'blk.0.q8' has unknown or unsupported ggml type " + std::to_string(t),
                                 "expected one of f32 (0)", "q4_K (12)"});
    }
}

TEST(GgufTensorInfo, EmptyAndDuplicateNames) {
    Writer w;
    w.add_tensor("w", {4}, quant::GgmlType::F32, filler(16, 0));
    w.add_tensor("w", {4}, quant::GgmlType::F32, filler(16, 1));
    Bytes b = w.serialize();
    const size_t second = 24 + (8 + 1 + 4 + 8 + 4 + 8);
    expect_error(b, second, {"tensor info #1 'w' duplicates the name of tensor #0"});

    Writer e;
    e.add_tensor("", {4}, quant::GgmlType::F32, filler(16, 0));
    expect_error(e.serialize(), 24, {"tensor info #0 has an empty name"});
}

TEST(GgufTensorInfo, MisalignedOffset) {
    Bytes b = sample_writer().serialize();
    const InfoFields f = tensor_info_fields(b, "blk.0.q4");
    put<uint64_t>(b, f.offset, 33);
    expect_error(b, f.offset, {"'blk.0.q4' data offset 33 is misaligned; expected a multiple of the alignment 32"});
}

TEST(GgufTensorData, OffsetOutOfRange) {
    Bytes b = sample_writer().serialize();
    const InfoFields f = tensor_info_fields(b, "blk.0.q8");
    put<uint64_t>(b, f.offset, uint64_t{1} << 40);
    expect_error(b, f.offset, {"truncated: tensor #2 'blk.0.q8' data needs 102 bytes",
                               "(data offset 1099511627776)", "the file is " + std::to_string(b.size())});
    put<uint64_t>(b, f.offset, kMaxU64 - 31);  // aligned, and offset + size overflows
    expect_error(b, f.offset, {"truncated: tensor #2 'blk.0.q8'"});
}

TEST(GgufTensorData, Overlap) {
    Bytes b = sample_writer().serialize();
    const InfoFields q4 = tensor_info_fields(b, "blk.0.q4");
    const InfoFields q8 = tensor_info_fields(b, "blk.0.q8");
    uint64_t q4_offset;
    std::memcpy(&q4_offset, b.data() + q4.offset, 8);
    put<uint64_t>(b, q8.offset, q4_offset);
    auto r = parse(b, "models/x.gguf");
    ASSERT_FALSE(r.ok());
    // Either tensor may be reported (equal offsets); both are named.
    EXPECT_NE(r.error().message.find("overlaps tensor #"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("blk.0.q4"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("blk.0.q8"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("expected disjoint tensors"), std::string::npos);

    // Partial overlap: norm.weight (32 bytes at 0) grown to 16 elements runs into blk.0.q4 at 32.
    b = sample_writer().serialize();
    const InfoFields norm = tensor_info_fields(b, "norm.weight");
    put<uint64_t>(b, norm.ne0, 16);
    expect_error(b, q4.offset, {"tensor #1 'blk.0.q4' data [32, 104) overlaps tensor #0 'norm.weight' [0, 64)"});
}

TEST(GgufTensorData, TruncatedData) {
    Bytes b = sample_writer().serialize();
    const InfoFields q8 = tensor_info_fields(b, "blk.0.q8");
    b.resize(b.size() - 40);  // the last 26 bytes are padding; this cuts into blk.0.q8
    expect_error(b, q8.offset, {"truncated: tensor #2 'blk.0.q8' data needs 102 bytes"});
}

TEST(GgufTensorData, DataSectionStartsPastTheEnd) {
    Writer w = sample_writer(3, 4096);
    Bytes b = w.serialize();
    const InfoFields q8 = tensor_info_fields(b, "blk.0.q8");
    const size_t infos_end = q8.offset + 8;
    b.resize(infos_end + 1);
    expect_error(b, infos_end, {"truncated: the tensor data section starts at byte 4096 (aligned to 4096)",
                                "the file is " + std::to_string(infos_end + 1) + " bytes"});
}

// Every proper prefix that ends before the last tensor byte must be rejected, with an offset
// inside the prefix, and never crash.
TEST(GgufRobustness, EveryTruncationIsAnError) {
    const Bytes full = sample_writer().serialize();
    auto whole = parse(full);
    ASSERT_TRUE(whole.ok());
    const TensorInfo& last = (*whole)->tensors().back();
    const size_t end = (*whole)->data_offset() + last.offset + last.n_bytes;
    for (size_t n = 0; n < end; ++n) {
        Bytes b(full.begin(), full.begin() + n);
        auto r = parse(b, "cut.gguf");
        ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
        const std::string& m = r.error().message;
        ASSERT_EQ(m.rfind("cut.gguf: byte ", 0), 0u) << m;
        const size_t off = std::stoull(m.substr(15));
        EXPECT_LE(off, n) << m;
        const bool says_why = m.find("truncated") != std::string::npos ||
                              m.find("exceeds") != std::string::npos ||
                              m.find("needs at least") != std::string::npos;
        EXPECT_TRUE(says_why) << m;
    }
    // Trailing padding after the last tensor is optional.
    Bytes b(full.begin(), full.begin() + end);
    EXPECT_TRUE(parse(b).ok());
}

// Random byte corruption: the parser either accepts or returns a well-formed error; it never
// crashes (the fuzzer covers this far more thoroughly under ASan/UBSan).
TEST(GgufRobustness, RandomCorruption) {
    const Bytes full = sample_writer().serialize();
    std::mt19937 rng(1234);
    for (int iter = 0; iter < 20000; ++iter) {
        Bytes b = full;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
        auto r = parse(b, "rand.gguf");
        if (!r.ok()) {
            ASSERT_EQ(r.error().message.rfind("rand.gguf: byte ", 0), 0u) << r.error().message;
        } else {
            for (const TensorInfo& t : (*r)->tensors()) {
                ASSERT_GE(t.data, b.data());
                ASSERT_LE(t.data + t.n_bytes, b.data() + b.size());
            }
        }
    }
}

}  // namespace
}  // namespace zinc::gguf::testing
