// zinc/cli/sigint.cpp — the SIGINT flag and its scoped handler (see sigint.h).
#include "cli/sigint.h"

#include <csignal>

namespace zinc::cli {

namespace {

// A signal handler receives no argument, so the only way for it to reach the run is a variable
// with static storage; the C and C++ standards allow a handler to do nothing but store to a
// `volatile std::sig_atomic_t`, so this one flag is the single piece of static mutable state of
// the CLI. It is set by the handler, polled between tokens, cleared when a guard is installed.
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) {
    g_interrupted = 1;
}

}  // namespace

SigintGuard::SigintGuard(bool once, bool restart) {
    g_interrupted = 0;
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = (once ? SA_RESETHAND : 0) | (restart ? SA_RESTART : 0);
    installed_ = ::sigaction(SIGINT, &sa, &old_) == 0;
}

SigintGuard::~SigintGuard() {
    if (installed_) ::sigaction(SIGINT, &old_, nullptr);
}

bool SigintGuard::fired() const {
    return g_interrupted != 0;
}

void SigintGuard::clear() {
    g_interrupted = 0;
}

}  // namespace zinc::cli
