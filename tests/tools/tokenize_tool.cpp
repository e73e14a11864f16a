// tokenize_tool — drives zinc's tokenizer for tests/py/test_tokenizer_parity.py.
//
//   tokenize_tool MODEL.gguf --info     special ids, add_bos/add_eos, EOG ids
//   tokenize_tool MODEL.gguf --vocab    one line a token: id, hex(piece), hex(piece special), type
//   tokenize_tool MODEL.gguf --batch    binary requests on stdin, one answer line each:
//       request = op (1 byte) | flags (1 byte) | length (u32 little-endian) | payload
//       'E' encode: payload = text bytes; flags bit0 add_special, bit1 parse_special
//           -> ids separated by spaces
//       'D' decode: payload = int32 LE ids; flags bit0 special
//           -> hex(decode(ids)) SPACE hex(IncrementalDetokenizer output, pushed id by id, then
//              finish())   ("-" stands for an empty byte string)
// Exit status 2 with one line on stderr for bad arguments or a model that fails to load.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

using zinc::tokenizer::IncrementalDetokenizer;
using zinc::tokenizer::TokenId;
using zinc::tokenizer::Tokenizer;

namespace {

std::string hex(const std::string& s) {
    if (s.empty()) return "-";
    static const char* k = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        out.push_back(k[c >> 4]);
        out.push_back(k[c & 15]);
    }
    return out;
}

bool read_exact(void* buf, size_t n) {
    return n == 0 || std::fread(buf, 1, n, stdin) == n;
}

int run_batch(const Tokenizer& tok) {
    std::string line;
    for (;;) {
        uint8_t head[6];
        if (!read_exact(head, 6)) break;
        const uint32_t len = uint32_t(head[2]) | uint32_t(head[3]) << 8 | uint32_t(head[4]) << 16 |
                             uint32_t(head[5]) << 24;
        std::string payload(len, '\0');
        if (!read_exact(payload.data(), len)) {
            std::fprintf(stderr, "tokenize_tool: truncated request\n");
            return 2;
        }
        line.clear();
        if (head[0] == 'E') {
            const auto ids = tok.encode(payload, head[1] & 1, head[1] & 2);
            for (size_t i = 0; i < ids.size(); ++i) {
                if (i) line.push_back(' ');
                line += std::to_string(ids[i]);
            }
        } else if (head[0] == 'D') {
            std::vector<TokenId> ids(len / 4);
            std::memcpy(ids.data(), payload.data(), ids.size() * 4);
            const bool special = head[1] & 1;
            line = hex(tok.decode(ids, special));
            IncrementalDetokenizer det(tok, special);
            std::string inc;
            for (TokenId id : ids) inc += det.push(id);
            inc += det.finish();
            line += ' ';
            line += hex(inc);
        } else {
            std::fprintf(stderr, "tokenize_tool: unknown op 0x%02x\n", head[0]);
            return 2;
        }
        line.push_back('\n');
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: tokenize_tool MODEL.gguf --info|--vocab|--batch\n");
        return 2;
    }
    auto file = zinc::gguf::File::open(argv[1]);
    if (!file.ok()) {
        std::fprintf(stderr, "tokenize_tool: %s\n", file.error().message.c_str());
        return 2;
    }
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok.ok()) {
        std::fprintf(stderr, "tokenize_tool: %s\n", tok.error().message.c_str());
        return 2;
    }
    const Tokenizer& t = **tok;
    const std::string mode = argv[2];
    if (mode == "--info") {
        std::printf("n_vocab %d\nbos %d\neos %d\neot %d\nadd_bos %d\nadd_eos %d\neog", t.n_vocab(),
                    t.bos(), t.eos(), t.eot(), t.add_bos() ? 1 : 0, t.add_eos() ? 1 : 0);
        for (TokenId id = 0; id < t.n_vocab(); ++id)
            if (t.is_eog(id)) std::printf(" %d", id);
        std::printf("\n");
        return 0;
    }
    if (mode == "--vocab") {
        std::string out;
        for (TokenId id = 0; id < t.n_vocab(); ++id) {
            out += std::to_string(id) + ' ' + hex(t.token_to_piece(id, false)) + ' ' +
                   hex(t.token_to_piece(id, true)) + ' ' +
                   std::to_string(static_cast<int>(t.token_type(id))) + '\n';
            if (out.size() > (1 << 20)) {
                std::fwrite(out.data(), 1, out.size(), stdout);
                out.clear();
            }
        }
        std::fwrite(out.data(), 1, out.size(), stdout);
        return 0;
    }
    if (mode == "--batch") return run_batch(t);
    std::fprintf(stderr, "tokenize_tool: unknown mode '%s'\n", mode.c_str());
    return 2;
}
