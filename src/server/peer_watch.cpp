// zinc/server/peer_watch.cpp — find a request's socket by its four-tuple; peek for peer close.
#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace zinc::server {

namespace {

// "addr", port of a socket address; false for families other than IPv4/IPv6.
bool describe(const sockaddr_storage& sa, std::string* addr, int* port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (sa.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
        if (!inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) return false;
        *port = ntohs(a->sin_port);
    } else if (sa.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
        if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) return false;
        *port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    *addr = buf;
    return true;
}

}  // namespace

PeerWatch::PeerWatch(const std::string& remote_addr, int remote_port,
                     const std::string& local_addr, int local_port)
    : remote_addr_(remote_addr),
      local_addr_(local_addr),
      remote_port_(remote_port),
      local_port_(local_port) {
    if (remote_port_ <= 0 || local_port_ <= 0) return;
    // The open descriptors (Linux: /proc/self/fd), else every number up to the limit: with a
    // high RLIMIT_NOFILE the blind scan costs tens of thousands of syscalls a request.
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
         it.increment(ec)) {
        const std::string n = it->path().filename().string();
        char* e = nullptr;
        const long fd = std::strtol(n.c_str(), &e, 10);
        if (e && *e == '\0' && fd >= 3 && fd <= INT_MAX && matches(static_cast<int>(fd))) {
            fd_ = static_cast<int>(fd);
            return;
        }
    }
    if (!ec) return;  // listed, and none is ours
    rlimit rl{};
    int max_fd = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536));
    for (int fd = 3; fd < max_fd; ++fd) {
        if (matches(fd)) {
            fd_ = fd;
            break;
        }
    }
}

bool PeerWatch::matches(int fd) const {
    sockaddr_storage peer{}, local{};
    socklen_t pl = sizeof peer, ll = sizeof local;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
    std::string a;
    int p = 0;
    if (!describe(peer, &a, &p) || p != remote_port_ || a != remote_addr_) return false;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
    return describe(local, &a, &p) && p == local_port_ && a == local_addr_;
}

bool PeerWatch::closed() const {
    if (fd_ < 0) return false;
    if (!matches(fd_)) return true;  // our connection is gone (the descriptor was closed or reused)
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;  // orderly shutdown by the peer
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    return false;  // data waiting (a pipelined request): the client is still there
}

}  // namespace zinc::server
