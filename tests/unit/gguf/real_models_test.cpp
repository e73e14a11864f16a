// tests/unit/gguf/real_models_test.cpp — the two real models open and agree with known facts about
// them (tensor counts, embedding shapes and types, architecture). Skipped when models are absent;
// the full field-by-field comparison with gguf.GGUFReader is tests/py/test_gguf_reader.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gguf/gguf.h"

namespace zinc::gguf {
namespace {

std::string model_path(const std::string& name) {
    const char* env = std::getenv("ZINC_SOURCE_DIR");
    return std::string(env ? env : ZINC_SOURCE_DIR) + "/models/" + name;
}

TEST(GgufRealModels, SmolLM2) {
    const std::string path = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
    auto r = File::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.tensors().size(), 272u);  // 30 layers x 9 + token_embd + output_norm (tied output)
    EXPECT_EQ(f.get_string("general.architecture")->value(), "llama");
    EXPECT_EQ(f.get_int("llama.block_count")->value(), 30);
    EXPECT_EQ(f.get_int("llama.embedding_length")->value(), 576);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model")->value(), "gpt2");
    auto tokens = f.get_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok() && *tokens);
    EXPECT_EQ((*tokens)->arr.size(), 49152u);
    const TensorInfo* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->n_dims, 2u);
    EXPECT_EQ(emb->ne[0], 576);
    EXPECT_EQ(emb->ne[1], 49152);
    EXPECT_EQ(emb->type, quant::GgmlType::Q8_0);
    EXPECT_EQ(emb->n_bytes, 49152u * (576 / 32) * 34);
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
    const TensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->type, quant::GgmlType::Q4_1);
    EXPECT_EQ(down->ne[0], 1536);
    EXPECT_EQ(down->ne[1], 576);
    for (const TensorInfo& t : f.tensors()) {
        EXPECT_NE(t.data, nullptr);
        EXPECT_LE(t.offset + t.n_bytes, f.file_size() - f.data_offset()) << t.name;
    }
}

TEST(GgufRealModels, Gemma3) {
    const std::string path = model_path("gemma-3-270m-q4_k_m.gguf");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
    auto r = File::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;
    EXPECT_EQ(f.tensors().size(), 236u);
    EXPECT_EQ(f.get_string("general.architecture")->value(), "gemma3");
    EXPECT_EQ(f.get_int("gemma3.block_count")->value(), 18);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model")->value(), "llama");
    auto tokens = f.get_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok() && *tokens);
    EXPECT_EQ((*tokens)->arr.size(), 262144u);
    const TensorInfo* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->ne[0], 640);
    EXPECT_EQ(emb->ne[1], 262144);
    EXPECT_EQ(emb->type, quant::GgmlType::Q8_0);
    // Every type present in the file is one zinc knows.
    bool seen_q4k = false, seen_q6k = false, seen_q5_0 = false;
    for (const TensorInfo& t : f.tensors()) {
        seen_q4k |= t.type == quant::GgmlType::Q4_K;
        seen_q6k |= t.type == quant::GgmlType::Q6_K;
        seen_q5_0 |= t.type == quant::GgmlType::Q5_0;
    }
    EXPECT_TRUE(seen_q4k && seen_q6k && seen_q5_0);
}

}  // namespace
}  // namespace zinc::gguf
