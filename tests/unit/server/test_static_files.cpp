// tests/unit/server/test_static_files.cpp — the web chat's embedded files (server/static_files.h):
// every file of src/server/webchat is embedded byte for byte, paths map to files or to nothing,
// content types, ETag matching; the chat_template_kwargs field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server/auth.h"
#include "server/completion_request.h"
#include "server/static_files.h"

using namespace zinc::server;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(StaticFiles, EveryWebchatFileIsEmbeddedAsIs) {
    const fs::path dir = fs::path(ZINC_SOURCE_DIR) / "src" / "server" / "webchat";
    std::set<std::string> on_disk, embedded;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) on_disk.insert(e.path().filename().string());
    for (const StaticAsset& a : webchat_assets()) {
        embedded.insert(a.name);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data), a.size),
                  read_file(dir / a.name))
            << a.name << ": rebuild (the embedded bytes are not the file's)";
    }
    EXPECT_EQ(on_disk, embedded);
    EXPECT_TRUE(embedded.count("index.html"));
}

TEST(StaticFiles, PathsAndTypes) {
    const StaticFile* root = find_static("/");
    ASSERT_NE(root, nullptr);
    EXPECT_STREQ(root->asset->name, "index.html");
    EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
    const StaticFile* js = find_static("/webchat/chat.js");
    ASSERT_NE(js, nullptr);
    EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
    EXPECT_NE(js->etag, root->etag);
    EXPECT_EQ(js->etag.front(), '"');
    EXPECT_EQ(find_static("/webchat/chat.css")->content_type, "text/css; charset=utf-8");
    EXPECT_EQ(find_static("/webchat/index.html"), root);
    for (const char* p : {"/webchat/", "/webchat/nope.js", "/webchat/../chat.js", "/index.html",
                          "/webchat/a/chat.js", "/webchatchat.js", "", "/chat.js"})
        EXPECT_EQ(find_static(p), nullptr) << p;
    EXPECT_EQ(content_type_for("x.svg"), "image/svg+xml");
    EXPECT_EQ(content_type_for("x.bin"), "application/octet-stream");
}

TEST(StaticFiles, EtagMatching) {
    EXPECT_TRUE(etag_matches("\"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("W/\"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("\"x\", \"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("*", "\"abc\""));
    EXPECT_FALSE(etag_matches("", "\"abc\""));
    EXPECT_FALSE(etag_matches("\"abcd\"", "\"abc\""));
    EXPECT_FALSE(etag_matches("abc", "\"abc\""));
}

TEST(StaticFiles, NoKeyForThePage) {
    EXPECT_FALSE(route_needs_key("/"));
    EXPECT_FALSE(route_needs_key("/webchat/chat.js"));
    EXPECT_TRUE(route_needs_key("/v1/models"));
    EXPECT_TRUE(route_needs_key("/webchat"));  // not a static path: as any other route
}

TEST(StaticFiles, ChatTemplateKwargs) {
    using nlohmann::json;
    const json base = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    auto parse = [&](const json& extra) {
        json b = base;
        for (auto& [k, v] : extra.items()) b[k] = v;
        return parse_chat_request(b, zinc::engine::SamplerOptions{});
    };
    EXPECT_FALSE(parse(json::object()).value().enable_thinking.has_value());
    auto off = parse({{"chat_template_kwargs", {{"enable_thinking", false}, {"x", 1}}}});
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off.value().enable_thinking, std::optional<bool>(false));
    EXPECT_EQ(
        parse({{"chat_template_kwargs", {{"enable_thinking", true}}}}).value().enable_thinking,
        std::optional<bool>(true));
    auto bad = parse({{"chat_template_kwargs", {{"enable_thinking", 1}}}});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().param,
              std::optional<std::string>("chat_template_kwargs.enable_thinking"));
    auto bad2 = parse({{"chat_template_kwargs", "x"}});
    ASSERT_FALSE(bad2.ok());
    EXPECT_EQ(bad2.error().param, std::optional<std::string>("chat_template_kwargs"));
}
