// zinc/server/json_schema_grammar.h — JSON Schema -> GBNF (engine/grammar.h), for
// response_format json_schema / json_object and the json_schema / guided_json fields.
//
// Supported: type (one or a list), properties, required, additionalProperties (false; or, on an
// object without properties, a schema for the values), enum, const, anyOf, oneOf (generated as
// anyOf: every branch is a valid output), allOf of one schema, $ref to "#/$defs/..." or
// "#/definitions/..." (recursion allowed), items, minItems, maxItems, minLength, maxLength, and
// the types string, number, integer, boolean, null, object, array. Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// ignored. Anything else (pattern, format, minimum, maximum, uniqueItems, ...) is a 400 naming
// its JSON path: an output that could break the schema is never produced silently.
//
// Properties are generated in the order the request's JSON object keeps them (nlohmann::json:
// sorted by name); optional ones may be left out; properties
// not listed are never generated (valid whatever additionalProperties says). Whitespace between
// tokens is at most one space or one newline plus up to 16 spaces, numbers have at most 16
// digits per part, so a model cannot run away inside the layout.
//
// SchemaSyntax::Gemma4 writes the same values in Gemma 4's tool-call syntax (gemma4_args.h):
// keys bare (`city:`), properties in the case-insensitive order of the template's `dictsort`,
// strings between `<|"|>` delimiters; a string never holds `<|` or `<<` and cannot end in `<`
// (so no delimiter can appear inside it), a length-bounded one holds no `<` at all. Property
// names that cannot be bare keys (empty, with `:` `}` `,` or whitespace, or starting with `<`)
// and const/enum strings holding `<|"|>` are a 400 naming their path.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace zinc::server {

/// GBNF text whose root matches exactly the JSON texts the schema at `path` accepts (within the
/// layout limits above). Errors name the schema keyword's JSON path.
ApiResult<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const std::string& path);

/// GBNF for any JSON object (response_format json_object).
std::string json_object_gbnf();

/// The schema's rules alone, its root named `root_name` and every other rule prefixed with
/// `prefix` (so several schemas share one grammar), without the primitives: add
/// json_primitives_gbnf() once.
enum class SchemaSyntax { Json, Gemma4 };
ApiResult<std::string> json_schema_rules(const nlohmann::json& schema, const std::string& path,
                                         const std::string& root_name, const std::string& prefix,
                                         SchemaSyntax syntax = SchemaSyntax::Json);
std::string json_primitives_gbnf(SchemaSyntax syntax = SchemaSyntax::Json);

/// A GBNF string literal matching exactly the bytes of `s` (quotes, backslashes and control
/// bytes escaped).
std::string gbnf_literal(const std::string& s);

}  // namespace zinc::server
