// zinc/chat/unicode.h — the Python str operations chat templates use, on UTF-8 text.
//
// Python strings are sequences of code points; ours are UTF-8 bytes. These helpers decode to
// code points where Python semantics need them (len, indexing, slicing, case mapping,
// whitespace). Invalid UTF-8 bytes are carried through as lone code points 0xDC80..0xDCFF
// (Python's "surrogateescape" idea), so decoding and re-encoding never changes the bytes.
//
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek (with final sigma), Cyrillic,
// Armenian, Georgian-free basics and fullwidth Latin; other scripts have no case and map to
// themselves. Letters outside these tables (e.g. Latin Extended-B digraphs, Deseret) are not
// case-mapped: a known, documented gap versus CPython's full Unicode database.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/taint.h"

namespace zinc::chat::text {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view cps);
void append_utf8(std::string& out, char32_t cp);
/// Byte offset of each code point of `s` as decode() splits it, plus s.size() at the end.
std::vector<size_t> cp_offsets(std::string_view s);
/// Number of code points (Python len()).
size_t length(std::string_view s);

/// Python str.isspace() for one code point (also what `\s` matches in Python's re).
bool is_space(char32_t c);
/// str.isprintable() for one code point (approximation: C0/C1 controls, separators other than
/// the ASCII space, format characters, private use and surrogates are non-printable).
bool is_printable(char32_t c);
bool is_cased_letter(char32_t c);  // has an upper/lower counterpart in our tables
bool is_upper_cp(char32_t c);
bool is_lower_cp(char32_t c);
bool is_alpha_cp(char32_t c);      // letters (approximation: cased letters plus CJK/kana/hangul)
bool is_digit_cp(char32_t c);      // ASCII and fullwidth digits

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()

/// str.strip/lstrip/rstrip: `chars` empty-and-not-given means whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
/// The byte range strip() keeps.
Span strip_range(std::string_view s, const std::string* chars, bool left, bool right);
/// Byte ranges of the parts split() / rsplit() / splitlines() return.
std::vector<Span> split_ranges(std::string_view s, const std::string* sep, long maxsplit);
std::vector<Span> rsplit_ranges(std::string_view s, const std::string* sep, long maxsplit);
std::vector<Span> splitlines_ranges(std::string_view s);
/// str.split(sep, maxsplit); sep == nullptr splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::string* sep, long maxsplit);
/// str.rsplit(sep, maxsplit).
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, long maxsplit);
/// str.replace(old, new, count); count < 0 means all.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, long count);
/// str.splitlines() (keepends = false), Python's line boundaries.
std::vector<std::string> splitlines(std::string_view s);

}  // namespace zinc::chat::text
