// zinc/cli/catalog.cpp — parsing and querying the model catalog (catalog.json, see catalog.h).
#include "cli/catalog.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/llama_compat.h"
#include "zinc_catalog.h"  // kBuiltinCatalog, generated from src/cli/catalog.json

namespace zinc::cli {

namespace {

using nlohmann::json;

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string lower(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

// One string field of `j` (an object), or an error naming `where`.key.
Result<std::string> get_string(const json& j, const char* key, const std::string& where,
                               bool required = true) {
    auto it = j.find(key);
    if (it == j.end()) {
        if (!required) return std::string();
        return make_error(where + "." + key + " is missing");
    }
    if (!it->is_string()) return make_error(where + "." + key + " must be a string");
    return it->get<std::string>();
}

// dst = get_string(...), returning its error from the enclosing function.
#define ZINC_GET_STRING(dst, ...)          \
    do {                                   \
        auto r_ = get_string(__VA_ARGS__); \
        if (!r_) return r_.error();        \
        dst = std::move(r_.value());       \
    } while (0)

bool is_sha256_hex(const std::string& s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!std::isxdigit(static_cast<unsigned char>(c)) ||
            std::isupper(static_cast<unsigned char>(c)))
            return false;
    return true;
}

Result<CatalogEntry> parse_entry(const json& m, const std::string& where) {
    if (!m.is_object()) return make_error(where + " must be an object");
    CatalogEntry e;
    ZINC_GET_STRING(e.name, m, "name", where);
    ZINC_GET_STRING(e.tag, m, "tag", where);
    ZINC_GET_STRING(e.description, m, "description", where, false);
    ZINC_GET_STRING(e.file, m, "file", where);
    ZINC_GET_STRING(e.sha256, m, "sha256", where);
    if (e.name.empty() || e.name.find_first_of(":/ ") != std::string::npos)
        return make_error(where + ".name '" + e.name +
                          "' must be non-empty, without ':', '/' or spaces");
    if (e.file.empty() || e.file.find('/') != std::string::npos || e.file[0] == '.')
        return make_error(where + ".file '" + e.file + "' must be a plain file name");
    if (!is_sha256_hex(e.sha256))
        return make_error(where + ".sha256 must be 64 lowercase hex digits");
    auto size = m.find("size");
    if (size == m.end() || !size->is_number_unsigned() || size->get<uint64_t>() == 0)
        return make_error(where + ".size must be a positive integer (bytes)");
    e.size = size->get<uint64_t>();
    if (auto d = m.find("default"); d != m.end()) {
        if (!d->is_boolean()) return make_error(where + ".default must be true or false");
        e.is_default = d->get<bool>();
    }
    if (auto a = m.find("aliases"); a != m.end()) {
        if (!a->is_array()) return make_error(where + ".aliases must be an array of strings");
        for (size_t i = 0; i < a->size(); ++i) {
            if (!(*a)[i].is_string())
                return make_error(where + ".aliases[" + std::to_string(i) + "] must be a string");
            e.aliases.push_back((*a)[i].get<std::string>());
        }
    }
    auto parts = m.find("parts");
    if (parts == m.end() || !parts->is_array() || parts->empty())
        return make_error(where + ".parts must be a non-empty array");
    for (size_t i = 0; i < parts->size(); ++i) {
        const std::string pw = where + ".parts[" + std::to_string(i) + "]";
        const json& p = (*parts)[i];
        if (!p.is_object()) return make_error(pw + " must be an object");
        CatalogPart part;
        ZINC_GET_STRING(part.package, p, "package", pw);
        ZINC_GET_STRING(part.version, p, "version", pw);
        ZINC_GET_STRING(part.member, p, "member", pw);
        e.parts.push_back(std::move(part));
    }
    return e;
}

}  // namespace

const CatalogEntry* Catalog::find(std::string_view name) const {
    for (const auto& e : entries) {
        if (iequal(name, e.name) || iequal(name, e.full_name())) return &e;
        for (const auto& a : e.aliases)
            if (iequal(name, a)) return &e;
    }
    return nullptr;
}

const CatalogEntry* Catalog::find_file(std::string_view file) const {
    for (const auto& e : entries)
        if (file == e.file) return &e;
    return nullptr;
}

const CatalogEntry* Catalog::default_entry() const {
    for (const auto& e : entries)
        if (e.is_default) return &e;
    return nullptr;
}

std::string Catalog::suggest(std::string_view name) const {
    std::vector<std::pair<std::string, std::string>> candidates;
    for (const auto& e : entries) {
        candidates.emplace_back(lower(e.name), e.name);
        candidates.emplace_back(lower(e.full_name()), e.full_name());
        for (const auto& a : e.aliases) candidates.emplace_back(lower(a), e.name);
    }
    return closest_match(lower(name), candidates);
}

std::string Catalog::names() const {
    std::string s;
    for (const auto& e : entries) s += (s.empty() ? "" : ", ") + e.name;
    return s;
}

Result<Catalog> parse_catalog(const std::string& text, const std::string& source) {
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return make_error("the model catalog " + source + " is not valid JSON");
    const std::string where = "the model catalog " + source + ": models";
    auto models = doc.is_object() ? doc.find("models") : doc.end();
    if (!doc.is_object() || models == doc.end() || !models->is_array())
        return make_error("the model catalog " + source + " has no \"models\" array");
    Catalog c;
    c.source = source;
    for (size_t i = 0; i < models->size(); ++i) {
        auto e = parse_entry((*models)[i], where + "[" + std::to_string(i) + "]");
        if (!e) return e.error();
        const CatalogEntry* clash = c.find(e->name) ? c.find(e->name) : c.find_file(e->file);
        for (const auto& a : e->aliases)
            if (!clash) clash = c.find(a);
        if (clash)
            return make_error(where + "[" + std::to_string(i) + "] (" + e->name +
                              ") repeats a name, alias or file of " + clash->name);
        c.entries.push_back(std::move(e.value()));
    }
    return c;
}

Result<const Catalog*> load_catalog() {
    static Result<Catalog> cat = []() -> Result<Catalog> {
        if (const char* p = std::getenv("ZINC_CATALOG"); p && *p) {
            std::ifstream f(p, std::ios::binary);
            if (!f)
                return make_error(std::string("cannot read the model catalog ZINC_CATALOG=") + p);
            std::ostringstream ss;
            ss << f.rdbuf();
            return parse_catalog(ss.str(), std::string("ZINC_CATALOG=") + p);
        }
        return parse_catalog(kBuiltinCatalog, "(built in)");
    }();
    if (!cat) return cat.error();
    return &cat.value();
}

}  // namespace zinc::cli
