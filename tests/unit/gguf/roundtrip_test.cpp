// tests/unit/gguf/roundtrip_test.cpp — Writer -> File: every value type, nested arrays, versions 2
// and 3, custom alignment, tensor placement, typed getters, and File::open on a real path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace zinc::gguf::testing {
namespace {

OwnedValue scalar(ValueType t, uint64_t u, int64_t i, double f) {
    OwnedValue o;
    o.type = t;
    o.u = u;
    o.i = i;
    o.f = f;
    return o;
}

TEST(GgufRoundTrip, EveryValueTypeAndNestedArrays) {
    Writer w;
    w.add_kv("u8", scalar(ValueType::UINT8, 250, 0, 0));
    w.add_kv("i8", scalar(ValueType::INT8, 0, -128, 0));
    w.add_kv("u16", scalar(ValueType::UINT16, 65535, 0, 0));
    w.add_kv("i16", scalar(ValueType::INT16, 0, -32768, 0));
    w.add_kv("u32", OwnedValue::u32(4294967295u));
    w.add_kv("i32", OwnedValue::i32(-2147483647 - 1));
    w.add_kv("u64", OwnedValue::u64(std::numeric_limits<uint64_t>::max()));
    w.add_kv("i64", scalar(ValueType::INT64, 0, std::numeric_limits<int64_t>::min(), 0));
    w.add_kv("f32", OwnedValue::f32(0.1f));
    w.add_kv("f64", scalar(ValueType::FLOAT64, 0, 0, -1e300));
    w.add_kv("bool", OwnedValue::boolean(true));
    w.add_kv("str", OwnedValue::string(std::string("a\0b\xff", 4)));
    w.add_kv("empty_str", OwnedValue::string(""));
    w.add_kv("strs", OwnedValue::string_array({"x", "", "yz"}));
    w.add_kv("f32s", OwnedValue::f32_array({1.5f, -2.f}));
    w.add_kv("empty_arr", OwnedValue::i32_array({}));
    w.add_kv("nested", OwnedValue::array(ValueType::ARRAY,
                                         {OwnedValue::i32_array({1, 2}), OwnedValue::i32_array({}),
                                          OwnedValue::array(ValueType::ARRAY,
                                                            {OwnedValue::string_array({"deep"})})}));
    const Bytes b = w.serialize();
    auto r = parse(b);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.metadata().size(), 17u);
    EXPECT_EQ(f.metadata()[0].first, "u8");
    EXPECT_EQ(f.find("u8")->u, 250u);
    EXPECT_EQ(f.find("i8")->i, -128);
    EXPECT_EQ(f.find("u16")->u, 65535u);
    EXPECT_EQ(f.find("i16")->i, -32768);
    EXPECT_EQ(f.find("u32")->u, 4294967295u);
    EXPECT_EQ(f.find("i32")->i, -2147483648LL);
    EXPECT_EQ(f.find("u64")->u, std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(f.find("i64")->i, std::numeric_limits<int64_t>::min());
    EXPECT_EQ(f.find("f32")->f, static_cast<double>(0.1f));
    EXPECT_EQ(f.find("f64")->f, -1e300);
    EXPECT_EQ(f.find("bool")->u, 1u);
    EXPECT_EQ(f.find("str")->str, std::string_view("a\0b\xff", 4));
    EXPECT_EQ(f.find("empty_str")->str, "");
    const Value* strs = f.find("strs");
    ASSERT_EQ(strs->type, ValueType::ARRAY);
    EXPECT_EQ(strs->elem_type, ValueType::STRING);
    ASSERT_EQ(strs->arr.size(), 3u);
    EXPECT_EQ(strs->arr[2].str, "yz");
    EXPECT_EQ(f.find("f32s")->arr[1].f, -2.0);
    EXPECT_TRUE(f.find("empty_arr")->arr.empty());
    EXPECT_EQ(f.find("empty_arr")->elem_type, ValueType::INT32);
    const Value* nested = f.find("nested");
    ASSERT_EQ(nested->elem_type, ValueType::ARRAY);
    ASSERT_EQ(nested->arr.size(), 3u);
    EXPECT_EQ(nested->arr[0].arr[1].i, 2);
    EXPECT_TRUE(nested->arr[1].arr.empty());
    EXPECT_EQ(nested->arr[2].arr[0].arr[0].str, "deep");
    EXPECT_EQ(f.find("missing"), nullptr);
    EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRoundTrip, TensorsAreAlignedAndPointAtTheirData) {
    for (uint32_t version : {2u, 3u}) {
        for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
            SCOPED_TRACE("version " + std::to_string(version) + " alignment " + std::to_string(alignment));
            Writer w = sample_writer(version, alignment);
            const Bytes b = w.serialize();
            auto r = parse(b);
            ASSERT_TRUE(r.ok()) << r.error().message;
            const File& f = **r;
            EXPECT_EQ(f.version(), version);
            EXPECT_EQ(f.alignment(), alignment);
            EXPECT_EQ(f.data_offset() % alignment, 0u);
            ASSERT_EQ(f.tensors().size(), 3u);
            const TensorInfo* q4 = f.find_tensor("blk.0.q4");
            ASSERT_NE(q4, nullptr);
            EXPECT_EQ(q4->n_dims, 2u);
            EXPECT_EQ(q4->ne[0], 64);
            EXPECT_EQ(q4->ne[1], 2);
            EXPECT_EQ(q4->ne[2], 1);
            EXPECT_EQ(q4->type, quant::GgmlType::Q4_0);
            EXPECT_EQ(q4->n_elements(), 128);
            EXPECT_EQ(q4->n_bytes, 2u * 2 * 18);
            EXPECT_EQ(q4->offset % alignment, 0u);
            const Bytes want = filler(q4->n_bytes, 2);
            EXPECT_EQ(Bytes(q4->data, q4->data + q4->n_bytes), want);
            EXPECT_EQ(q4->data, b.data() + f.data_offset() + q4->offset);
            const TensorInfo* q8 = f.find_tensor("blk.0.q8");
            ASSERT_NE(q8, nullptr);
            EXPECT_EQ(Bytes(q8->data, q8->data + q8->n_bytes), filler(3 * 34, 3));
            EXPECT_EQ(f.find_tensor("nope"), nullptr);
            EXPECT_EQ(f.tensors()[0].name, "norm.weight");  // file order kept
        }
    }
}

TEST(GgufRoundTrip, TypedGetters) {
    Writer w;
    w.add_kv("s", OwnedValue::string("hi"));
    w.add_kv("n", OwnedValue::u32(7));
    w.add_kv("big", OwnedValue::u64(std::numeric_limits<uint64_t>::max()));
    w.add_kv("x", OwnedValue::f32(2.5f));
    w.add_kv("b", OwnedValue::boolean(false));
    w.add_kv("a", OwnedValue::i32_array({3}));
    const Bytes b = w.serialize();
    auto r = parse(b, "getters.gguf");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;

    EXPECT_EQ(f.get_string("s")->value(), "hi");
    EXPECT_FALSE(f.get_string("absent")->has_value());
    auto bad = f.get_string("n");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("getters.gguf: byte "), std::string::npos);
    EXPECT_NE(bad.error().message.find("'n' has type u32; expected string"), std::string::npos)
        << bad.error().message;

    EXPECT_EQ(f.get_int("n")->value(), 7);
    EXPECT_FALSE(f.get_int("s").ok());
    EXPECT_FALSE(f.get_int("big").ok());  // does not fit in i64
    EXPECT_FALSE(f.get_int("b").ok());

    EXPECT_EQ(f.get_float("x")->value(), 2.5);
    EXPECT_EQ(f.get_float("n")->value(), 7.0);
    EXPECT_FALSE(f.get_float("s").ok());

    EXPECT_EQ(f.get_bool("b")->value(), false);
    EXPECT_FALSE(f.get_bool("n").ok());

    auto arr = f.get_array("a");
    ASSERT_TRUE(arr.ok());
    ASSERT_NE(*arr, nullptr);
    EXPECT_EQ((*arr)->arr[0].i, 3);
    EXPECT_EQ(f.get_array("absent").value(), nullptr);
    EXPECT_FALSE(f.get_array("s").ok());
}

TEST(GgufValue, Conversions) {
    Value v;
    v.type = ValueType::UINT64;
    v.u = std::numeric_limits<uint64_t>::max();
    EXPECT_TRUE(v.is_integer());
    EXPECT_FALSE(v.as_int().has_value());
    EXPECT_EQ(*v.as_float(), 18446744073709551615.0);
    v.type = ValueType::INT16;
    v.i = -5;
    EXPECT_EQ(*v.as_int(), -5);
    v.type = ValueType::BOOL;
    v.u = 1;
    EXPECT_FALSE(v.is_integer());
    EXPECT_EQ(*v.as_int(), 1);
    EXPECT_FALSE(v.as_float().has_value());
    v.type = ValueType::STRING;
    EXPECT_FALSE(v.as_int().has_value());
    EXPECT_EQ(value_type_name(ValueType::FLOAT64), "f64");
    EXPECT_EQ(value_type_name(static_cast<ValueType>(99)), "invalid");
}

TEST(GgufRoundTrip, ReleaseMetadataKeepsTensors) {
    const Bytes b = sample_writer().serialize();
    auto r = parse(b);
    ASSERT_TRUE(r.ok()) << r.error().message;
    File& f = **r;
    EXPECT_FALSE(f.metadata_released());
    f.release_metadata();
    EXPECT_TRUE(f.metadata_released());
    const TensorInfo* t = f.find_tensor("blk.0.q8");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(Bytes(t->data, t->data + t->n_bytes), filler(3 * 34, 3));
    EXPECT_DEATH((void)f.find("general.architecture"), "internal check failed");
}

class TempDir {
public:
    TempDir() {
        path_ = std::filesystem::temp_directory_path() /
                ("zinc_gguf_test_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& n) const { return (path_ / n).string(); }
    std::string dir() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

TEST(GgufOpen, MapsAFileFromDisk) {
    TempDir tmp;
    const std::string path = tmp.file("sample.gguf");
    ASSERT_TRUE(sample_writer().write_file(path).ok());
    auto r = File::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)->path(), path);
    EXPECT_EQ((*r)->file_size(), std::filesystem::file_size(path));
    const TensorInfo* t = (*r)->find_tensor("norm.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(Bytes(t->data, t->data + t->n_bytes), filler(32, 1));
}

TEST(GgufOpen, MissingDirectoryAndEmptyFiles) {
    TempDir tmp;
    auto missing = File::open(tmp.file("nope.gguf"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, tmp.file("nope.gguf") + ": cannot open: No such file or directory");

    auto dir = File::open(tmp.dir());
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.error().message, tmp.dir() + ": is a directory; expected a GGUF file");

    const std::string empty = tmp.file("empty.gguf");
    std::fclose(std::fopen(empty.c_str(), "wb"));
    auto e = File::open(empty);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message, empty + ": byte 0: truncated: file is 0 bytes; a GGUF header needs 24");
}

TEST(GgufOpen, MetadataOnlyFileWithoutDataSection) {
    Writer w;
    w.add_kv("general.architecture", OwnedValue::string("llama"));
    Bytes b = w.serialize();
    // The writer pads to the alignment; a file that simply ends after its metadata is valid too.
    const size_t end = after_string(b, "llama");
    b.resize(end);
    auto r = parse(b);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE((*r)->tensors().empty());
}

}  // namespace
}  // namespace zinc::gguf::testing
