// zinc/backend/cuda/repack.cpp — host-side repacking of weight rows (see repack.h).
#include "backend/cuda/repack.h"

#include <cstring>

namespace zinc::cuda {

namespace {
constexpr int kQ4_0 = 2, kQ8_0 = 8, kQ6_K = 14;
}

int repacked_type(int type, int64_t k, bool enabled) {
    if (!enabled) return type;
    if ((type == kQ4_0 || type == kQ8_0) && k % 256 == 0) return type + 100;
    if (type == kQ6_K && k % 2048 == 0) return 114;
    return type;
}

void repack_rows(int type, const uint8_t* src, uint8_t* dst, int64_t n_rows, int64_t k) {
    if (type == kQ4_0 || type == kQ8_0) {
        const int qbytes = type == kQ4_0 ? 16 : 32, bsz = qbytes + 2;
        const int64_t nb = k / 32;
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t* s = src + r * nb * bsz;
            uint8_t* d = dst + r * nb * bsz;
            for (int64_t b = 0; b < nb; ++b) {
                std::memcpy(d + b * qbytes, s + b * bsz + 2, qbytes);
                std::memcpy(d + nb * qbytes + 2 * b, s + b * bsz, 2);
            }
        }
    } else if (type == kQ6_K) {
        const int64_t nb = k / 256;
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t* s = src + r * nb * 210;
            uint8_t* d = dst + r * nb * 210;
            for (int64_t b = 0; b < nb; ++b) {
                std::memcpy(d + 128 * b, s + 210 * b, 128);                // ql
                std::memcpy(d + 128 * nb + 64 * b, s + 210 * b + 128, 64);  // qh
                std::memcpy(d + 192 * nb + 16 * b, s + 210 * b + 192, 16);  // scales
                std::memcpy(d + 208 * nb + 2 * b, s + 210 * b + 208, 2);    // d
            }
        }
    }
}

}  // namespace zinc::cuda
