// Tier choice (runtime/tier.h) over fake device probes, and the parsing of the runtime's
// environment switches.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/tier.h"

namespace rt = zinc::runtime;
namespace cu = zinc::cuda;

namespace {

cu::Probe gpu_probe(size_t free_bytes, int index = 0) {
    cu::Probe p;
    p.built = true;
    cu::DeviceInfo d;
    d.index = index;
    d.name = "NVIDIA H200";
    d.cc_major = 9;
    d.mem_total = 150ull << 30;
    d.mem_free = free_bytes;
    p.devices.push_back(d);
    return p;
}

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> m) {
    auto owned = std::make_shared<std::map<std::string, std::string>>(std::move(m));
    return [owned](const char* k) -> const char* {
        auto it = owned->find(k);
        return it == owned->end() ? nullptr : it->second.c_str();
    };
}

}  // namespace

TEST(Tier, AutoPicksCudaWhenADeviceHoldsTheModel) {
    auto c =
        rt::choose_tier(rt::TierRequest::Auto, "default", gpu_probe(100ull << 30), 1ull << 30, 0);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->tier, rt::Tier::Cuda);
    EXPECT_NE(c->reason.find("H200"), std::string::npos) << c->reason;
    EXPECT_EQ(c->reason.find('\n'), std::string::npos);
}

TEST(Tier, AutoFallsToCpuWithTheReason) {
    cu::Probe none;
    none.built = false;
    auto c = rt::choose_tier(rt::TierRequest::Auto, "default", none, 1, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("built without"), std::string::npos) << c->reason;

    cu::Probe nodev;
    nodev.built = true;
    nodev.reason = "no NVIDIA driver (libcuda.so.1 not found or not loadable)";
    c = rt::choose_tier(rt::TierRequest::Auto, "default", nodev, 1, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("no NVIDIA driver"), std::string::npos) << c->reason;

    // Too little free memory.
    c = rt::choose_tier(rt::TierRequest::Auto, "default", gpu_probe(1ull << 20), 2ull << 30, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("free"), std::string::npos) << c->reason;

    // A device index that does not exist.
    c = rt::choose_tier(rt::TierRequest::Auto, "default", gpu_probe(100ull << 30, 0), 1, 3);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
}

TEST(Tier, ExplicitCudaThatCannotBeMetIsAnError) {
    cu::Probe nodev;
    nodev.built = true;
    nodev.reason = "no CUDA device found";
    auto c = rt::choose_tier(rt::TierRequest::Cuda, "--tier", nodev, 1, 0);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find("--tier=cuda"), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("no CUDA device found"), std::string::npos);
    c = rt::choose_tier(rt::TierRequest::Cuda, "ZINC_TIER", gpu_probe(1 << 20), 1ull << 30, 0);
    ASSERT_FALSE(c.ok());
}

TEST(Tier, CpuIsAlwaysGranted) {
    auto c = rt::choose_tier(rt::TierRequest::Cpu, "--tier", gpu_probe(100ull << 30), 1, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("--tier=cpu"), std::string::npos) << c->reason;
}

TEST(RuntimeOptions, FlagBeatsEnvAndEnvBeatsDefault) {
    auto o = rt::runtime_options("", env_of({}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->tier, rt::TierRequest::Auto);
    EXPECT_EQ(o->tier_source, "default");
    o = rt::runtime_options("", env_of({{"ZINC_TIER", "cpu"}}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->tier, rt::TierRequest::Cpu);
    EXPECT_EQ(o->tier_source, "ZINC_TIER");
    o = rt::runtime_options("cuda", env_of({{"ZINC_TIER", "cpu"}}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->tier, rt::TierRequest::Cuda);
    EXPECT_EQ(o->tier_source, "--tier");
    EXPECT_FALSE(rt::runtime_options("gpu", env_of({})).ok());
    auto bad = rt::runtime_options("", env_of({{"ZINC_TIER", "tpu"}}));
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("ZINC_TIER"), std::string::npos);
}

TEST(RuntimeOptions, Switches) {
    auto o = rt::runtime_options("", env_of({{"ZINC_VALIDATE", "4"},
                                             {"ZINC_VALIDATE_STRICT", "1"},
                                             {"ZINC_VALIDATE_TOL", "0.1,0.2"},
                                             {"ZINC_SKIP_LAYERS", "3,5"},
                                             {"ZINC_CPU_OPS", "glu"},
                                             {"ZINC_TEST_CORRUPT", "attn_out:2"}}));
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->validate_steps, 4);
    EXPECT_TRUE(o->validate_strict);
    EXPECT_DOUBLE_EQ(o->thresholds.residual, 0.1);
    EXPECT_DOUBLE_EQ(o->thresholds.logits, 0.2);
    EXPECT_EQ(o->skip_layers, (std::vector<int>{3, 5}));
    EXPECT_EQ(o->cpu_ops, (std::vector<std::string>{"glu"}));
    EXPECT_EQ(o->corrupt.name, "attn_out");
    EXPECT_EQ(o->corrupt.il, 2);
    for (auto [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"ZINC_VALIDATE", "x"},
                                                          {"ZINC_VALIDATE", "-1"},
                                                          {"ZINC_VALIDATE_STRICT", "yes"},
                                                          {"ZINC_VALIDATE_TOL", "0"},
                                                          {"ZINC_SKIP_LAYERS", "a"},
                                                          {"ZINC_CPU_OPS", "matmul"},
                                                          {"ZINC_TEST_CORRUPT", "l_out"}}) {
        auto r = rt::runtime_options("", env_of({{k, v}}));
        ASSERT_FALSE(r.ok()) << k << "=" << v;
        EXPECT_NE(r.error().message.find(k), std::string::npos) << r.error().message;
    }
}

// -d N / ZINC_DEVICE (issue 5 item 5): parsed with its source; a device asked for explicitly
// that is not among the usable ones is an error naming them (auto too); the CPU tier ignores it
// and says so; the default index keeps the old auto behaviour (CPU with the reason).
TEST(Device, FlagThenEnvThenZero) {
    auto o = rt::runtime_options("", -1, env_of({}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->device, 0);
    EXPECT_EQ(o->device_source, "default");
    o = rt::runtime_options("", -1, env_of({{"ZINC_DEVICE", "3"}}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->device, 3);
    EXPECT_EQ(o->device_source, "ZINC_DEVICE");
    o = rt::runtime_options("", 1, env_of({{"ZINC_DEVICE", "3"}}));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->device, 1);
    EXPECT_EQ(o->device_source, "-d");
    for (const char* bad : {"x", "-1", "1024", "1.5", " 2"}) {
        auto r = rt::runtime_options("", -1, env_of({{"ZINC_DEVICE", bad}}));
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_NE(r.error().message.find("ZINC_DEVICE="), std::string::npos);
    }
    EXPECT_FALSE(rt::runtime_options("", 5000, env_of({})).ok());
}

TEST(Device, ExplicitIndexMustExist) {
    cu::Probe two = gpu_probe(100ull << 30, 0);
    two.devices.push_back(two.devices[0]);
    two.devices[1].index = 1;
    two.devices[1].name = "NVIDIA H100";
    // Present: used, and the reason names it.
    auto c = rt::choose_tier(rt::TierRequest::Auto, "default", two, 1, 1, "-d");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cuda);
    EXPECT_EQ(c->device, 1);
    EXPECT_NE(c->reason.find("CUDA device 1 (NVIDIA H100"), std::string::npos) << c->reason;
    // Missing: an error naming the devices found, under auto and cuda alike.
    for (auto req : {rt::TierRequest::Auto, rt::TierRequest::Cuda}) {
        auto e = rt::choose_tier(req, "default", two, 1, 7, "ZINC_DEVICE");
        ASSERT_FALSE(e.ok());
        EXPECT_NE(e.error().message.find("ZINC_DEVICE 7: no usable CUDA device 7; usable devices "
                                         "found: 0 (NVIDIA H200, compute 9.0), 1 (NVIDIA H100"),
                  std::string::npos)
            << e.error().message;
    }
    // The CPU tier ignores it, and says so.
    c = rt::choose_tier(rt::TierRequest::Cpu, "--tier", two, 1, 7, "-d");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("(-d 7 ignored"), std::string::npos) << c->reason;
    // No device at all: auto runs on the CPU naming the index; cuda is an error naming it.
    cu::Probe none;
    none.built = false;
    c = rt::choose_tier(rt::TierRequest::Auto, "default", none, 1, 1, "-d");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tier, rt::Tier::Cpu);
    EXPECT_NE(c->reason.find("(-d 1 asked for)"), std::string::npos) << c->reason;
    auto e = rt::choose_tier(rt::TierRequest::Cuda, "--tier", none, 1, 1, "-d");
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("built without the CUDA tier (-d 1 asked for)"),
              std::string::npos)
        << e.error().message;
}

// --tensor-parallel on the CUDA tier: never more ranks than usable devices (issue 19).
TEST(TensorParallel, CudaRanksAtMostTheUsableDevices) {
    const cu::Probe one = gpu_probe(size_t{100} << 30);
    EXPECT_EQ(rt::cuda_tensor_parallel(0, one).value(), 0);
    EXPECT_EQ(rt::cuda_tensor_parallel(1, one).value(), 1);
    EXPECT_EQ(rt::cuda_tensor_parallel(-1, one).value(), 1);  // --split-mode row: all of them
    auto two = rt::cuda_tensor_parallel(2, one);
    ASSERT_FALSE(two.ok());
    EXPECT_EQ(two.error().message, "--tensor-parallel 2: the CUDA tier has 1 usable device (" +
                                       rt::describe_devices(one) + "); N must be at most 1");
    cu::Probe none;
    none.reason = "no CUDA device";
    auto r = rt::cuda_tensor_parallel(1, none);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("the CUDA tier has 0 usable devices"), std::string::npos);
}
