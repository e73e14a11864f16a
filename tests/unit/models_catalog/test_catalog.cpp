// The model catalog (src/cli/catalog.h): the built-in catalog parses and names the three models
// scripts/fetch-models knows; names, name:tag and aliases find an entry, case-insensitively, and
// a wrong tag finds nothing; "did you mean" uses the flags' rule (closest_match); a malformed
// catalog is one error naming the JSON path of the bad field.
#include <gtest/gtest.h>

#include <string>

#include "cli/catalog.h"
#include "cli/llama_compat.h"
#include "zinc_catalog.h"

using zinc::cli::Catalog;
using zinc::cli::parse_catalog;

namespace {

std::string one_model(const std::string& fields) {
    return R"({"models": [{"name": "tiny", "tag": "q8_0", "file": "tiny.gguf", "size": 10,
               "sha256": ")" +
           std::string(64, 'a') + R"(", "parts": [{"package": "p",
               "version": "1", "member": "p/tiny.gguf"}])" +
           fields + "}]}";
}

}  // namespace

TEST(ModelsCatalog, BuiltInCatalogHasTheThreeModels) {
    auto c = parse_catalog(kBuiltinCatalog, "(built in)");
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_EQ(c->entries.size(), 3u);
    EXPECT_EQ(c->names(), "smollm2-135m, gemma-3-270m, qwen2.5-coder-0.5b");
    const auto* d = c->default_entry();
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->file, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EXPECT_EQ(d->size, 98362432u);
    EXPECT_EQ(c->find("qwen2.5-coder")->parts.size(), 6u);
    EXPECT_EQ(c->find("gemma3")->parts.size(), 4u);
}

TEST(ModelsCatalog, NamesTagsAndAliasesFindAnEntry) {
    auto c = parse_catalog(kBuiltinCatalog, "(built in)");
    ASSERT_TRUE(c);
    const auto* smol = c->find("smollm2-135m");
    ASSERT_NE(smol, nullptr);
    EXPECT_EQ(c->find("SmolLM2-135M:Q4_1"), smol);
    EXPECT_EQ(c->find("smollm2"), smol);
    EXPECT_EQ(c->find("smollm2-135m:q8_0"), nullptr);  // a tag the catalog does not have
    EXPECT_EQ(c->find("smollm2-135"), nullptr);
    EXPECT_EQ(c->find_file("gemma-3-270m-q4_k_m.gguf"), c->find("gemma-3-270m"));
    EXPECT_EQ(smol->full_name(), "smollm2-135m:q4_1");
}

TEST(ModelsCatalog, SuggestionsUseTheFlagRule) {
    auto c = parse_catalog(kBuiltinCatalog, "(built in)");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->suggest("smolm2"), "smollm2-135m");  // one edit from the alias
    EXPECT_EQ(c->suggest("gemma-3-27"), "gemma-3-270m");
    EXPECT_EQ(c->suggest("Qwen2.5-coder-0.5"), "qwen2.5-coder-0.5b");
    EXPECT_EQ(c->suggest("llama-3-70b"), "");
    // closest_match is the flags' rule: within max(2, |word| / 3) edits.
    EXPECT_EQ(zinc::cli::closest_match("tmep", {{"temp", "--temp"}, {"top-k", "--top-k"}}),
              "--temp");
    EXPECT_EQ(zinc::cli::closest_match("xyzzy", {{"temp", "--temp"}}), "");
}

TEST(ModelsCatalog, MalformedCatalogsNameTheField) {
    auto bad = [](const std::string& text) {
        auto c = parse_catalog(text, "t.json");
        EXPECT_FALSE(c);
        return c ? std::string() : c.error().message;
    };
    EXPECT_TRUE(parse_catalog(one_model(""), "t.json"));
    EXPECT_EQ(bad("{"), "the model catalog t.json is not valid JSON");
    EXPECT_EQ(bad("{}"), "the model catalog t.json has no \"models\" array");
    std::string s = one_model("");
    std::string neg = s;
    neg.replace(neg.find("\"size\": 10"), 10, "\"size\": -1");
    EXPECT_EQ(bad(neg),
              "the model catalog t.json: models[0].size must be a positive integer (bytes)");
    std::string upper = s;
    upper.replace(upper.find(std::string(64, 'a')), 64, std::string(64, 'A'));
    EXPECT_EQ(bad(upper),
              "the model catalog t.json: models[0].sha256 must be 64 lowercase hex digits");
    std::string no_parts = s;
    no_parts.replace(no_parts.find("\"parts\""), 7, "\"party\"");
    EXPECT_EQ(bad(no_parts), "the model catalog t.json: models[0].parts must be a non-empty array");
    std::string path_file = s;
    path_file.replace(path_file.find("tiny.gguf"), 9, "../x.gguf");
    EXPECT_EQ(bad(path_file),
              "the model catalog t.json: models[0].file '../x.gguf' must be a plain file name");
    std::string two =
        R"({"models": [)" + s.substr(12, s.size() - 14) + "," + s.substr(12, s.size() - 14) + "]}";
    EXPECT_EQ(bad(two),
              "the model catalog t.json: models[1] (tiny) repeats a name, alias or file of tiny");
}
