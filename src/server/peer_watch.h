// zinc/server/peer_watch.h — private to src/server: notices that the client of a request has
// closed its connection while the request is queued or generating (a non-streamed request writes
// nothing until it ends; a stream writes nothing while its request waits for a slot).
//
// cpp-httplib (0.11) gives a handler no handle on its socket. The connection is identified by
// its four-tuple instead: the handler knows the peer and local address and port, and the socket
// with exactly those (getpeername/getsockname) among this process's descriptors is the one. A
// closed peer shows as an orderly end of stream: recv(MSG_PEEK) returning 0 (or ECONNRESET).
// The tuple is re-checked on every poll, so a descriptor reused by another connection after
// ours closed is never mistaken for ours (it then reads as closed, which is true).
#pragma once

#include <string>

namespace zinc::server {

class PeerWatch {
  public:
    /// Finds the socket (the open descriptors in /proc/self/fd, else every number up to
    /// RLIMIT_NOFILE); when none matches (e.g. a test without a real socket), closed() is
    /// always false.
    PeerWatch(const std::string& remote_addr, int remote_port, const std::string& local_addr,
              int local_port);
    /// True when the peer has closed or reset the connection. Never blocks, never consumes data.
    bool closed() const;
    /// Whether the request's socket was found.
    bool found() const { return fd_ >= 0; }

  private:
    bool matches(int fd) const;
    std::string remote_addr_, local_addr_;
    int remote_port_, local_port_;
    int fd_ = -1;
};

}  // namespace zinc::server
