// tests/cuda/emu/stubs.cpp — host emulation (run_emu.py): the one device probe the emulated
// test_exact_ops sees.
#include "backend/cuda/cuda_tier.h"

namespace zinc::cuda {
Probe probe() {
    Probe p;
    p.built = true;
    p.devices.resize(1);
    p.devices[0].name = "host emulation (tests/cuda/emu)";
    return p;
}
}  // namespace zinc::cuda
