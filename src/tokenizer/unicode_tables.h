// zinc/tokenizer/unicode_tables.h — raw Unicode data tables (generated into unicode_tables.cpp by
// src/tokenizer/tools/gen_unicode_tables.py and case_nfd_tables.cpp by gen_case_nfd_tables.py,
// from Unicode 15.1, the version llama.cpp's tables use).
// Use the accessors in unicode.h rather than these arrays directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zinc::tokenizer::unicode_data {

struct CpRange {
    uint32_t first;  // first code point of the range (the range ends where the next one starts)
    uint8_t cls;     // CpClass value, see unicode.h
};

extern const CpRange kCpClassRanges[];
extern const size_t kCpClassRangesCount;
extern const uint32_t kWhiteSpace[];  // sorted
extern const size_t kWhiteSpaceCount;

// case_nfd_tables.cpp (tools/gen_case_nfd_tables.py): simple lowercase mappings, sorted by
// code point, and the first code point of each code point's NFD decomposition, as ranges.
struct CpPair {
    uint32_t cp, mapped;
};
struct NfdRange {
    uint32_t first, last, base;  // every code point in [first, last] decomposes to base + marks
};
extern const CpPair kLowercase[];
extern const size_t kLowercaseCount;
extern const NfdRange kNfdRanges[];
extern const size_t kNfdRangesCount;

}  // namespace zinc::tokenizer::unicode_data
