// zinc/cli/sigint.h — Ctrl-C (SIGINT) handling shared by the one-shot run and `zinc chat`: a
// scoped handler that only raises a flag, polled by the generation loops between tokens.
#pragma once

#include <signal.h>

namespace zinc::cli {

/// Installs a SIGINT handler while alive and restores the previous action after. The handler
/// only stores to a `volatile sig_atomic_t` (all a handler may portably do).
///
/// * `once`: SA_RESETHAND, so a second Ctrl-C kills the process at once (the one-shot run).
///   `zinc chat` leaves it off: every Ctrl-C only raises the flag.
/// * `restart`: SA_RESTART, so a system call interrupted by the signal (e.g. a write of
///   streamed output) is retried. Off, a blocking read() returns EINTR, which is how the chat
///   prompt notices Ctrl-C while waiting for a line.
class SigintGuard {
  public:
    explicit SigintGuard(bool once = true, bool restart = true);
    ~SigintGuard();
    SigintGuard(const SigintGuard&) = delete;
    SigintGuard& operator=(const SigintGuard&) = delete;
    bool fired() const;
    /// Lower the flag (after the caller has acted on a Ctrl-C).
    void clear();

  private:
    struct sigaction old_{};
    bool installed_ = false;
};

}  // namespace zinc::cli
