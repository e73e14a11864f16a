// zinc/cli/synth_random.cpp — the random rows and blocks of `zinc synth` (synth_random.h).
#include "cli/synth_random.h"

#include <cstring>

#include "quant/quant.h"

namespace zinc::cli {

using quant::GgmlType;

namespace {
void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// f16 of x with the significand cut to 7 bits, so that 7.5 * d (Q4_K's dmin) is exact.
uint16_t f16_short(float x) {
    return static_cast<uint16_t>(quant::fp32_to_fp16(x) & ~0xFu);
}
}  // namespace

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
uint64_t hash_str(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// Row r of a tensor: n values ~ N(mean, sigma), from (seed, name, r) only. Each value is the
// Irwin-Hall sum of four 16-bit uniforms, standardized (|z| <= 3.46): cheap and close enough to
// Gaussian for synthetic weights.
void fill_row(uint64_t tensor_seed, int64_t r, float mean, float sigma, float* out, int64_t n) {
    uint64_t s = tensor_seed ^ (static_cast<uint64_t>(r) * 0xd1b54a32d192ed03ull);
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(12 / 4) per 16-bit unit
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = splitmix(s);
        const uint32_t sum = static_cast<uint32_t>(v & 0xffff) + static_cast<uint32_t>((v >> 16) & 0xffff) +
                             static_cast<uint32_t>((v >> 32) & 0xffff) + static_cast<uint32_t>(v >> 48);
        out[i] = mean + sigma * (static_cast<float>(sum) - 131070.0f) * kScale;
    }
}

// ---- direct random blocks
//
// For Q8_0, Q4_0, Q4_K and Q6_K the blocks are written directly from random codes and scales
// (no float weights, no quantizer), drawn so that a block's values have mean ~0 and standard
// deviation sigma, like the N(0, sigma) rows they replace:
//   Q8_0  q a uniform random byte, -128 mapped to 0 (symmetric, sd 73.47), d = sigma / 73.47;
//   Q4_0  q from a uniform nibble through 1..15 plus an extra 8 (q - 8 symmetric, sd 4.18);
//   Q4_K  q uniform 0..15, sub-block scales sc uniform 16..31 with mins m = sc and
//         dmin = 7.5 d (values d * sc * (q - 7.5), sd 4.61 * rms(sc) = 110.4 d);
//   Q6_K  q uniform 0..63 (q - 32: sd 18.48), scales uniform 4..7 (rms 5.61).
// d is jittered by a factor 0.8..1.2 per block. Other types (BF16, F32) and `--from-floats`
// take the float path: fill_row, then quant::quantize_row.
bool direct_type(GgmlType t) {
    return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_K || t == GgmlType::Q6_K;
}



void direct_row(GgmlType t, Rng& g, float sigma, uint8_t* dst, int64_t n) {
    auto jitter = [&] { return 0.8f + 0.4f * g.unit(); };
    if (t == GgmlType::Q8_0) {
        for (int64_t b = 0; b < n / 32; ++b, dst += 34) {
            put16(dst, quant::fp32_to_fp16(sigma / 73.47f * jitter()));
            for (int i = 0; i < 32; i += 8) {
                const uint64_t v = g.next();
                std::memcpy(dst + 2 + i, &v, 8);
            }
            for (int i = 0; i < 32; ++i)  // -128 -> 0: codes symmetric about 0
                if (dst[2 + i] == 0x80) dst[2 + i] = 0;
        }
    } else if (t == GgmlType::Q4_0) {
        // nibble -> code: 1..15 and an extra 8, symmetric about 8 (sd of code - 8: 4.18)
        static constexpr uint8_t kNib[16] = {1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11, 12, 13, 14, 15};
        for (int64_t b = 0; b < n / 32; ++b, dst += 18) {
            put16(dst, quant::fp32_to_fp16(sigma / 4.183f * jitter()));
            for (int i = 0; i < 16; i += 8) {
                const uint64_t v = g.next();
                for (int k = 0; k < 8; ++k) {
                    const unsigned byte = static_cast<unsigned>(v >> (8 * k)) & 0xffu;
                    dst[2 + i + k] = static_cast<uint8_t>(kNib[byte & 15] | (kNib[byte >> 4] << 4));
                }
            }
        }
    } else if (t == GgmlType::Q4_K) {
        for (int64_t b = 0; b < n / 256; ++b, dst += 144) {
            const uint16_t d = f16_short(sigma / 110.4f * jitter());
            put16(dst, d);
            put16(dst + 2, quant::fp32_to_fp16(7.5f * quant::fp16_to_fp32(d)));
            uint8_t sc[8];
            const uint64_t v = g.next();
            for (int j = 0; j < 8; ++j) sc[j] = static_cast<uint8_t>(16 + ((v >> (4 * j)) & 15));
            uint8_t* q = dst + 4;  // scales[12]: 6-bit scales and mins (here equal)
            for (int j = 0; j < 4; ++j) {
                q[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
                q[j + 4] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
                q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((sc[j + 4] & 15) << 4));
            }
            for (int i = 0; i < 128; i += 8) {
                const uint64_t r = g.next();
                std::memcpy(dst + 16 + i, &r, 8);
            }
        }
    } else {  // Q6_K: ql[128] qh[64] scales[16] d
        for (int64_t b = 0; b < n / 256; ++b, dst += 210) {
            for (int i = 0; i < 192; i += 8) {
                const uint64_t r = g.next();
                std::memcpy(dst + i, &r, 8);
            }
            const uint64_t v = g.next();
            for (int j = 0; j < 16; ++j) dst[192 + j] = static_cast<uint8_t>(4 + ((v >> (2 * j)) & 3));
            put16(dst + 208, quant::fp32_to_fp16(sigma / (18.48f * 5.61f) * jitter()));
        }
    }
}

}  // namespace zinc::cli
