// tests/cuda/trace/trace_stubs.cpp — the CUDA runtime, the kernel launchers of
// backend/cuda/kernels.h, cuBLAS and the device probe, replaced by recorders: each launch
// writes one line (its name and every argument, device pointers named by the buffer they point
// into, trace.h) to the trace; nothing is computed. Device memory is host memory, so the
// Runner's host-side copies (validation captures, fault injection, ZINC_CPU_OPS) really run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cublas_lib.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "trace.h"

namespace trace {
namespace {
struct Range {
    const char* base;
    size_t size;
    std::string name;
};
std::map<const char*, Range>& ranges() {
    static std::map<const char*, Range> r;
    return r;
}
int n_alloc = 0;
bool capturing = false;
struct HostRange {
    const char* base;
    size_t size;
    std::string name;
};
std::map<const char*, HostRange>& host_ranges() {
    static std::map<const char*, HostRange> r;
    return r;
}
// A device allocation copied into from a named host range takes the range's name.
void name_from_host(void* dst, const void* src) {
    const char* c = static_cast<const char*>(src);
    auto it = host_ranges().upper_bound(c);
    if (it == host_ranges().begin()) return;
    --it;
    if (c < it->second.base || c >= it->second.base + it->second.size) return;
    auto d = ranges().find(static_cast<const char*>(dst));
    if (d != ranges().end()) d->second.name = it->second.name;
}
}  // namespace

void host_name(const void* p, size_t n, const std::string& nm) {
    host_ranges()[static_cast<const char*>(p)] = {static_cast<const char*>(p), n, nm};
}

std::vector<std::string> lines;
bool on = false;

void name(const void* p, const std::string& n) {
    auto it = ranges().find(static_cast<const char*>(p));
    if (it != ranges().end()) it->second.name = n;
}

std::string sym(const void* p) {
    if (!p) return "null";
    const char* c = static_cast<const char*>(p);
    auto it = ranges().upper_bound(c);
    if (it != ranges().begin()) {
        --it;
        const Range& r = it->second;
        if (c >= r.base && c < r.base + r.size + 1) {
            const size_t off = static_cast<size_t>(c - r.base);
            return off ? r.name + "+" + std::to_string(off) : r.name;
        }
    }
    return "host";
}

void log(const std::string& s) {
    if (on) lines.push_back(s);
}

}  // namespace trace

using trace::sym;

namespace {
std::string I(long long v) {
    return std::to_string(v);
}
std::string F(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}
std::string row_out(const zinc::cuda::RowOut& o) {
    return "{f=" + sym(o.f) + " h=" + sym(o.h) + " q=" + sym(o.q) + " d=" + sym(o.d) +
           " mode=" + I(o.mode) + "}";
}
std::string jobs(const zinc::cuda::MatJob* j, int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i)
        s += "{w=" + sym(j[i].w) + " rb=" + I(static_cast<long long>(j[i].row_bytes)) +
             " n=" + I(j[i].n_out) + " y=" + sym(j[i].y) + " ldy=" + I(j[i].ldy) +
             " b=" + sym(j[i].bias) + "}";
    return s + "]";
}
}  // namespace

// ---- runtime
cudaError_t cudaMalloc(void** p, size_t n) {
    char* m = static_cast<char*>(std::calloc(n ? n : 1, 1));
    *p = m;
    trace::ranges()[m] = {m, n, "alloc" + std::to_string(trace::n_alloc++)};
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    trace::ranges().erase(static_cast<const char*>(p));
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
    *p = std::calloc(n ? n : 1, 1);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
    std::free(p);
    return cudaSuccess;
}
static const char* kind(cudaMemcpyKind k) {
    return k == cudaMemcpyHostToDevice ? "H2D" : k == cudaMemcpyDeviceToHost ? "D2H" : "D2D";
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind k) {
    std::memmove(dst, src, n);
    if (k == cudaMemcpyHostToDevice) trace::name_from_host(dst, src);
    trace::log(std::string("memcpy ") + kind(k) + " " + sym(dst) + " <- " + sym(src) + " " +
               I(static_cast<long long>(n)));
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t) {
    std::memmove(dst, src, n);
    trace::log(std::string("memcpy_async ") + kind(k) + " " + sym(dst) + " <- " + sym(src) + " " +
               I(static_cast<long long>(n)));
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n) {
    std::memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) {
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    return cudaSuccess;
}
cudaError_t cudaGetLastError() {
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    static int token;
    *s = &token;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    trace::log("sync");
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
    trace::capturing = true;
    trace::log("graph_begin_capture");
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
    trace::capturing = false;
    static int token;
    *g = &token;
    trace::log("graph_end_capture");
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t, unsigned long long) {
    static int token;
    *e = &token;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t) {
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) {
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
    trace::log("graph_launch");
    return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t) {
    return "cudaErrorStub";
}
const char* cudaGetErrorString(cudaError_t) {
    return "stub";
}

namespace zinc::cuda {

// ---- probe: one device with room for anything
Probe probe() {
    Probe p;
    p.built = true;
    DeviceInfo d;
    d.name = "trace stub";
    d.cc_major = 9;
    p.devices.push_back(d);
    return p;
}
std::string version_string(int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// ---- cuBLAS: available (ZINC_TRACE_CUBLAS=0: missing), its GEMMs recorded
CublasLib::CublasLib() {
    const char* e = std::getenv("ZINC_TRACE_CUBLAS");
    if (!e || std::string(e) != "0") handle_ = reinterpret_cast<cublasHandle_t>(this);
}
CublasLib::~CublasLib() = default;
bool CublasLib::gemm_f16(cudaStream_t, int m, int n, int k, const void* w, const void* x, float* y,
                         int ldy, float beta) {
    trace::log("cublas_gemm_f16 m=" + I(m) + " n=" + I(n) + " k=" + I(k) + " w=" + sym(w) +
               " x=" + sym(x) + " y=" + sym(y) + " ldy=" + I(ldy) + " beta=" + F(beta));
    return true;
}

// ---- kernels.h
void rms_norm_out(const float* x, const float* w, float eps, int n_rows, int dim, RowOut out, bool,
                  cudaStream_t) {
    trace::log("rms_norm_out x=" + sym(x) + " w=" + sym(w) + " eps=" + F(eps) +
               " rows=" + I(n_rows) + " dim=" + I(dim) + " out=" + row_out(out));
}
void pack_rows(const float* x, int n_rows, int dim, RowOut out, cudaStream_t) {
    trace::log("pack_rows x=" + sym(x) + " rows=" + I(n_rows) + " dim=" + I(dim) +
               " out=" + row_out(out));
}
void glu_out(const float* gate, const float* up, int ld, bool gelu, int n_rows, int dim, RowOut out,
             cudaStream_t) {
    trace::log("glu_out g=" + sym(gate) + " u=" + sym(up) + " ld=" + I(ld) + " gelu=" + I(gelu) +
               " rows=" + I(n_rows) + " dim=" + I(dim) + " out=" + row_out(out));
}
void add_rms_norm(float* x, const float* h, const float* w, float eps, int n_rows, int dim, bool,
                  cudaStream_t) {
    trace::log("add_rms_norm x=" + sym(x) + " h=" + sym(h) + " w=" + sym(w) + " eps=" + F(eps) +
               " rows=" + I(n_rows) + " dim=" + I(dim));
}
void add_inplace(float* x, const float* h, int64_t n, cudaStream_t) {
    trace::log("add_inplace x=" + sym(x) + " h=" + sym(h) + " n=" + I(n));
}
bool dmmv_supports(int) {
    return true;
}
void dmmv(int type, const MatJob* j, int n_jobs, int k, const int8_t* aq, const float4* ad,
          const float* xf, int n_act, bool acc, cudaStream_t) {
    trace::log("dmmv type=" + I(type) + " jobs=" + jobs(j, n_jobs) + " k=" + I(k) +
               " aq=" + sym(aq) + " ad=" + sym(ad) + " xf=" + sym(xf) + " n_act=" + I(n_act) +
               " acc=" + I(acc));
}
// mmq (the int8 tensor-core GEMM) is not recorded: as if it covered no type, so the fast
// settings trace the dequantize + cuBLAS path for prefill (the same for both revisions).
bool mmq_supports(int) {
    return false;
}
bool mmq(int, const MatJob*, int, int, const int8_t*, const float4*, int, bool, cudaStream_t) {
    return false;
}
bool dmmv_exact_supports(int) {
    return true;
}
void dmmv_exact(int type, const MatJob* j, int n_jobs, int k, const int8_t* aq, const float4* ad,
                const float* xf, int n_act, bool acc, cudaStream_t) {
    trace::log("dmmv_exact type=" + I(type) + " jobs=" + jobs(j, n_jobs) + " k=" + I(k) +
               " aq=" + sym(aq) + " ad=" + sym(ad) + " xf=" + sym(xf) + " n_act=" + I(n_act) +
               " acc=" + I(acc));
}
void dequant_f16(int type, const uint8_t* w, size_t row_bytes, int n_out, int k, uint16_t* dst,
                 cudaStream_t) {
    trace::log("dequant_f16 type=" + I(type) + " w=" + sym(w) +
               " rb=" + I(static_cast<long long>(row_bytes)) + " n=" + I(n_out) + " k=" + I(k) +
               " dst=" + sym(dst));
}
void get_rows(int type, const uint8_t* w, size_t row_bytes, const int32_t* rows, int n, int k,
              float scale, float* out, cudaStream_t) {
    trace::log("get_rows type=" + I(type) + " w=" + sym(w) +
               " rb=" + I(static_cast<long long>(row_bytes)) + " rows=" + sym(rows) + " n=" + I(n) +
               " k=" + I(k) + " scale=" + F(scale) + " out=" + sym(out));
}
void rope_kv(const RopeJob& j, int n_rows, cudaStream_t) {
    trace::log("rope_kv q=" + sym(j.q) + " k=" + sym(j.k) + " v=" + sym(j.v) + " ld=" + I(j.q_ld) +
               "," + I(j.k_ld) + "," + I(j.v_ld) + " b=" + sym(j.bq) + "," + sym(j.bk) + "," +
               sym(j.bv) + " norm=" + sym(j.q_norm) + "," + sym(j.k_norm) + " eps=" + F(j.eps) +
               " heads=" + I(j.n_head) + "," + I(j.n_head_kv) + " hd=" + I(j.head_dim) + "," +
               I(j.head_dim_v) + " n_rot=" + I(j.n_rot) + " neox=" + I(j.neox) +
               " cs=" + sym(j.cs) + " pos=" + sym(j.row_pos) + " slot=" + sym(j.row_slot) +
               " kc=" + sym(j.k_cache) + " vc=" + sym(j.v_cache) + " rows=" + I(n_rows));
}
int attn_max_chunks(int max_pos) {
    return (max_pos + 63) / 64;
}
cudaError_t attention_prepare(int, int) {
    return cudaSuccess;
}
void attention(const AttnJob& j, int n_rows, cudaStream_t) {
    trace::log("attention q=" + sym(j.q) + " ldq=" + I(j.q_ld) + " out=" + sym(j.out) +
               " ldo=" + I(j.out_ld) + " kc=" + sym(j.k_cache) + " vc=" + sym(j.v_cache) +
               " heads=" + I(j.n_head) + "," + I(j.n_head_kv) + " hd=" + I(j.head_dim) + "," +
               I(j.head_dim_v) + " scale=" + F(j.scale) + " window=" + I(j.window) +
               " bs=" + I(j.block_size) + " pos=" + sym(j.row_pos) + " rowbt=" + sym(j.row_bt) +
               " bt=" + sym(j.bt) + " max_pos=" + I(j.max_pos) + " part=" + sym(j.part) +
               " cnt=" + sym(j.counters) + " rows=" + I(n_rows));
}
bool attention_fast_covers(const AttnJob& j) {
    const int d = j.head_dim;
    return d == j.head_dim_v && (d == 64 || d == 128 || d == 256) && j.n_head_kv > 0 &&
           j.n_head % j.n_head_kv == 0;
}
bool attention_fast_prefill(const AttnJob& j, int row0, int n_rows, cudaStream_t) {
    trace::log("attention_fast_prefill q=" + sym(j.q) + " out=" + sym(j.out) +
               " kc=" + sym(j.k_cache) + " heads=" + I(j.n_head) + "," + I(j.n_head_kv) +
               " hd=" + I(j.head_dim) + " window=" + I(j.window) + " sinks=" + sym(j.sinks) +
               " rows=" + I(row0) + "+" + I(n_rows));
    return true;
}
bool attention_fast_decode(const AttnJob& j, int row0, int n_rows, cudaStream_t) {
    trace::log("attention_fast_decode q=" + sym(j.q) + " out=" + sym(j.out) +
               " kc=" + sym(j.k_cache) + " heads=" + I(j.n_head) + "," + I(j.n_head_kv) +
               " hd=" + I(j.head_dim) + " window=" + I(j.window) + " sinks=" + sym(j.sinks) +
               " part=" + sym(j.part) + " rows=" + I(row0) + "+" + I(n_rows));
    return true;
}
void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out, cudaStream_t) {
    trace::log("gather_rows x=" + sym(x) + " rows=" + sym(rows) + " n=" + I(n) + " dim=" + I(dim) +
               " out=" + sym(out));
}
size_t argmax_scratch_bytes(int n_rows, int n_vocab) {
    return static_cast<size_t>(n_rows) * 64 * 8 + static_cast<size_t>(n_vocab) * 0 + 64;
}
void argmax_rows(const float* logits, int n_rows, int n_vocab, int32_t* tokens, void* scratch,
                 cudaStream_t) {
    trace::log("argmax_rows l=" + sym(logits) + " rows=" + I(n_rows) + " vocab=" + I(n_vocab) +
               " tok=" + sym(tokens) + " scratch=" + sym(scratch));
}
void softcap(float* x, int64_t n, float cap, cudaStream_t) {
    trace::log("softcap x=" + sym(x) + " n=" + I(n) + " cap=" + F(cap));
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t) {
    trace::log("f32_to_f16 x=" + sym(x) + " y=" + sym(y) + " n=" + I(n));
}
void sample_rows(float* logits, int n_rows, int n_vocab, const SampleRowParams*, const int32_t*,
                 const int32_t*, float*, SampleOut*, bool, cudaStream_t) {
    trace::log("sample_rows l=" + sym(logits) + " rows=" + I(n_rows) + " vocab=" + I(n_vocab));
}

}  // namespace zinc::cuda
