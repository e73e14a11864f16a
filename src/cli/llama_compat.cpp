// zinc/cli/llama_compat.cpp — see llama_compat.h.
#include "cli/llama_compat.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cli/validators.h"

namespace zinc::cli {

namespace {

int g_verbosity = kLogInfo;

constexpr const char* kNoDownload =
    "zinc does not download from Hugging Face; `zinc pull NAME` fetches a model of zinc's "
    "catalog (`zinc list --catalog` shows them) and -m NAME runs it; for any other .gguf, "
    "download it yourself (e.g. `huggingface-cli download REPO FILE.gguf --local-dir models`) "
    "and pass -m models/FILE.gguf";

// A llama.cpp flag: its spellings, the zinc flag it becomes (tried in order: the first one the
// subcommand has wins), or, when none applies, why zinc refuses it.
struct LlamaFlag {
    std::vector<std::string_view> names;
    std::vector<std::string_view> zinc;
    const char* refusal;  // nullptr: "zinc <cmd> has no such flag" is enough
};

const std::vector<LlamaFlag>& llama_flags() {
    static const std::vector<LlamaFlag> flags = {
        {{"-ngl", "--gpu-layers"}, {"--n-gpu-layers"}, nullptr},
        {{"-sys"}, {"--system-prompt"}, nullptr},
        {{"-np"}, {"--parallel"}, nullptr},
        {{"--ctx-size"}, {"--context"}, nullptr},
        {{"--no-display-prompt"}, {"--no-echo"}, nullptr},
        {{"-lv", "--verbosity"}, {"--log-verbosity"}, nullptr},
        {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfd", "--hf-repo-draft", "-hft",
          "--hf-token", "-hfv", "-hfrv", "--hf-repo-v", "-hffv", "--hf-file-v", "-mu",
          "--model-url", "-dr", "--docker-repo"},
         {},
         kNoDownload},
        {{"-cnv", "--conversation", "-i", "--interactive", "--interactive-first", "-if"},
         {},
         "zinc's conversation mode is its own command: zinc chat -m FILE (line editing, "
         "history, multi-line input)"},
        {{"-no-cnv", "--no-conversation"},
         {},
         "zinc --prompt TEXT already completes once without a conversation; drop the flag "
         "(zinc chat is the conversation mode)"},
        {{"-fa", "--flash-attn"},
         {},
         "zinc has no flash-attention switch (it chooses its attention kernels itself); drop "
         "the flag"},
        {{"-ctk", "--cache-type-k", "-ctv", "--cache-type-v"},
         {},
         "zinc's KV cache type is fixed (f16); drop the flag"},
        {{"-tb", "--threads-batch"},
         {},
         "zinc uses -t threads for both prefill and decode; drop the flag"},
        {{"-tp"}, {"--tensor-parallel"}, nullptr},
        {{"-sm", "--split-mode"}, {"--split-mode"}, nullptr},
        {{"-ts", "--tensor-split"}, {"--tensor-split"}, nullptr},
        {{"-mg", "--main-gpu", "-dev"},
         {},
         "zinc picks devices 0..N-1 for --tensor-parallel N, or one with -d N (--tier cpu: "
         "none)"},
        {{"-nkvo", "--no-kv-offload"},
         {},
         "zinc keeps the KV cache on the tier's device; use --tier cpu to run without a GPU"},
        {{"-cb", "--cont-batching"}, {}, "zinc serve always batches continuously; drop the flag"},
    };
    return flags;
}

const LlamaFlag* find_llama_flag(std::string_view name) {
    for (const auto& f : llama_flags())
        for (auto n : f.names)
            if (n == name) return &f;
    return nullptr;
}

bool looks_numeric(std::string_view a) {
    if (a.size() < 2 || a[0] != '-') return false;
    char* end = nullptr;
    const std::string s(a);
    errno = 0;
    std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
}

// Does the app know this flag (spelled with its dashes, no "=value")?
const CLI::Option* known(const CLI::App& app, const std::string& name) {
    if (name.size() < 2 || name[0] != '-') return nullptr;
    return app.get_option_no_throw(name);
}

bool takes_value(const CLI::Option* o) {
    return o != nullptr && o->get_items_expected_min() > 0;
}

std::string app_label(const CLI::App& app) {
    const std::string& n = app.get_name();
    return n.empty() ? "zinc" : n;
}

}  // namespace

int log_verbosity() {
    return g_verbosity;
}

void set_log_verbosity(int level) {
    g_verbosity = level;
}

void add_verbosity_flags(CLI::App& app) {
    app.add_flag_callback(
        "-q,--quiet", [] { set_log_verbosity(std::min(log_verbosity(), kLogWarn)); },
        "no tier, evidence, timing or note lines on stderr (warnings and errors still print)");
    app.add_option_function<int>(
           "--log-verbosity", [](const int& v) { set_log_verbosity(v); },
           "stderr detail as llama.cpp's -lv: 1 errors, 2 + warnings, 3 + information "
           "(default 3; -q is 2)")
        ->check(int_in(0, 10));
}

void add_gpu_layers_flag(CLI::App& app, std::string& value) {
    app.add_option("--n-gpu-layers", value,
                   "llama.cpp's -ngl: 0 runs on the CPU tier (--tier cpu); any other value "
                   "(99, all, auto, -1) keeps the tier choice: zinc offloads all layers or none");
}

std::string apply_gpu_layers(const std::string& value, std::string& tier) {
    if (value.empty()) return "";
    if (value == "all" || value == "auto") return "";
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (end != value.c_str() + value.size() || errno == ERANGE || n < -1)
        return "--n-gpu-layers/-ngl: '" + value +
               "' is not a layer count: expected an integer >= -1, all or auto";
    if (n == 0) {
        if (tier == "cuda")
            return "-ngl 0 asks for no GPU layers but --tier cuda for all of them; drop one";
        tier = "cpu";
        return "";
    }
    if (n >= 1 && n < 99 && log_warn())
        std::fprintf(stderr,
                     "zinc: note: -ngl %lld: zinc does not split a model between CPU and GPU; it "
                     "runs every layer on the CUDA tier when a GPU is usable (-ngl 0 means --tier "
                     "cpu)\n",
                     n);
    return "";
}

void add_tensor_parallel_flags(CLI::App& app, TensorParallelFlags& f) {
    app.add_option("--tensor-parallel", f.tensor_parallel,
                   "split attention heads and FFN columns over N ranks (-tp N): N GPUs on the "
                   "CUDA tier (N = 1 today), N shards summed in lockstep on the CPU tier (a "
                   "correctness mode); docs/cuda.md")
        ->check(int_in(1, 1024));
    app.add_option("--split-mode", f.split_mode,
                   "llama.cpp's -sm: row = tensor parallel over every usable GPU (or "
                   "--tensor-parallel N), none = one device; layer is not supported");
    app.add_option("--tensor-split", f.tensor_split,
                   "llama.cpp's -ts: equal proportions only (1,1 = --tensor-parallel 2)");
}

std::string apply_tensor_parallel(const TensorParallelFlags& f, int& n) {
    n = f.tensor_parallel;
    if (!f.tensor_split.empty()) {
        std::vector<double> parts;
        std::string cur;
        for (size_t i = 0; i <= f.tensor_split.size(); ++i) {
            const char c = i < f.tensor_split.size() ? f.tensor_split[i] : ',';
            if (c != ',' && c != '/') {
                cur += c;
                continue;
            }
            char* end = nullptr;
            const double v = std::strtod(cur.c_str(), &end);
            if (cur.empty() || end != cur.c_str() + cur.size() || !(v >= 0))
                return "--tensor-split/-ts: '" + f.tensor_split +
                       "' is not a list of proportions (e.g. 1,1)";
            parts.push_back(v);
            cur.clear();
        }
        for (double v : parts)
            if (v != parts[0] || v == 0)
                return "--tensor-split " + f.tensor_split +
                       ": zinc splits attention heads and FFN columns evenly over the ranks; "
                       "unequal splits are not supported (use --tensor-parallel N)";
        const int k = static_cast<int>(parts.size());
        if (n != 0 && n != k)
            return "--tensor-split " + f.tensor_split + " names " + std::to_string(k) +
                   " ranks but --tensor-parallel is " + std::to_string(n);
        n = k;
    }
    if (f.split_mode.empty()) return "";
    if (f.split_mode == "none") {
        if (n > 1)
            return "--split-mode none (one device) contradicts --tensor-parallel " +
                   std::to_string(n);
        return "";
    }
    if (f.split_mode == "layer")
        return "--split-mode layer (layers spread over GPUs) is not supported: zinc splits "
               "each layer's heads and FFN columns (--split-mode row, --tensor-parallel N)";
    if (f.split_mode != "row")
        return "--split-mode/-sm: '" + f.split_mode + "': expected none, layer or row";
    if (n == 0) n = -1;  // every usable device, counted when the tier is chosen
    return "";
}

bool rewrite_llama_args(const CLI::App& app, int argc, char** argv, std::vector<std::string>& out,
                        std::string& error) {
    out.clear();
    if (argc > 0) out.emplace_back(argv[0]);
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {  // everything after is positional
            for (; i < argc; ++i) out.emplace_back(argv[i]);
            break;
        }
        if (a.size() < 2 || a[0] != '-' || looks_numeric(a)) {
            out.push_back(std::move(a));
            continue;
        }
        const size_t eq = a.find('=');
        const std::string name = a.substr(0, eq);
        const std::string rest = eq == std::string::npos ? "" : a.substr(eq);
        const CLI::Option* opt = known(app, name);
        if (opt == nullptr) {
            if (const LlamaFlag* f = find_llama_flag(name)) {
                for (auto z : f->zinc)
                    if ((opt = known(app, std::string(z))) != nullptr) {
                        a = std::string(z) + rest;
                        break;
                    }
                if (opt == nullptr) {
                    error = name + ": " +
                            (f->refusal ? std::string(f->refusal)
                                        : "a llama.cpp flag that " + app_label(app) +
                                              " does not have (see --help)");
                    return false;
                }
            } else if (name.size() > 2 && name[1] != '-' && eq == std::string::npos &&
                       known(app, "-" + name) != nullptr) {
                // "-temp": a long flag with one dash (CLI11 would read it as -t emp).
                error = name + ": unknown flag; did you mean -" + name + "? (see --help)";
                return false;
            }
        }
        out.push_back(std::move(a));
        // The value of an option that takes one is never rewritten ("--prompt -hf" is a prompt).
        if (takes_value(opt) && eq == std::string::npos && i + 1 < argc)
            out.emplace_back(argv[++i]);
    }
    return true;
}

int edit_distance(const std::string& a, const std::string& b) {
    // Optimal string alignment: insertions, deletions, substitutions and adjacent
    // transpositions ("--tmep" is one step from "--temp") cost 1 each.
    const size_t n = a.size(), m = b.size();
    std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
    for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                                d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

std::string closest_match(const std::string& word,
                          const std::vector<std::pair<std::string, std::string>>& candidates) {
    std::string best;
    int best_d = 1 << 30;
    for (const auto& [compared, shown] : candidates) {
        const int d = edit_distance(word, compared);
        if (d < best_d) best_d = d, best = shown;  // the first of equally close ones wins
    }
    const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
    return best_d <= limit ? best : "";
}

std::string unknown_flag_message(const CLI::App& app, const std::vector<std::string>& args) {
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") break;
        if (a.size() < 2 || a[0] != '-' || looks_numeric(a)) continue;
        const std::string name = a.substr(0, a.find('='));
        if (const CLI::Option* full = known(app, name)) {
            if (takes_value(full) && a.find('=') == std::string::npos) ++i;  // its value
            continue;
        }
        if (name[1] != '-' && known(app, name.substr(0, 2)))
            continue;  // "-n5": a short flag with its value attached
        // Closest long flag name, over a distance a typo can reach, and llama.cpp's spellings
        // that this subcommand accepts ("--ngl" -> -ngl).
        const std::string bare = name.substr(name.find_first_not_of('-'));
        std::vector<std::pair<std::string, std::string>> candidates;  // (compared, shown)
        for (const CLI::Option* o : app.get_options())
            for (const auto& l : o->get_lnames()) candidates.emplace_back(l, "--" + l);
        for (const auto& f : llama_flags())
            for (auto z : f.zinc)
                if (known(app, std::string(z)))
                    for (auto n : f.names)
                        candidates.emplace_back(std::string(n.substr(n.find_first_not_of('-'))),
                                                std::string(n));
        const std::string best = closest_match(bare, candidates);
        std::string msg = name + ": unknown flag of " + app_label(app);
        if (!best.empty()) msg += "; did you mean " + best + "?";
        return msg + " (see --help)";
    }
    return "";
}

}  // namespace zinc::cli
