// zinc/cli/server_registry.h — running zinc servers, for zinc ps and zinc rm: each `zinc serve`
// writes RUNTIME/servers/<pid>.json (pid, its start time, address, model name and path) once it
// listens and removes it when it stops. RUNTIME is $ZINC_RUNTIME_DIR, else $XDG_RUNTIME_DIR/zinc,
// else /tmp/zinc-<uid>. An entry whose process is gone (a killed server) is stale: readers drop
// it (and delete its file). The pid's start time (/proc/<pid>/stat) tells a reused pid apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zinc::cli {

struct ServerEntry {
    int pid = 0;
    uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22
    std::string host;
    int port = 0;
    std::string model;    // the served model id (GET /v1/models)
    std::string path;     // the model file, absolute
    int64_t started = 0;  // seconds since the epoch
    std::string file;     // the entry's own file
};

/// The registry folder (RUNTIME/servers).
std::string server_registry_dir();

/// Registers this process while alive: written by the constructor (failures only warn: a
/// server runs without ps knowing), removed by the destructor.
class ServerRegistration {
  public:
    ServerRegistration(const std::string& host, int port, const std::string& model,
                       const std::string& path);
    ~ServerRegistration();
    ServerRegistration(const ServerRegistration&) = delete;
    ServerRegistration& operator=(const ServerRegistration&) = delete;

  private:
    std::string file_;
};

/// The registered servers whose process is alive, by pid; stale entries are deleted.
std::vector<ServerEntry> live_servers();

/// "http://HOST:PORT" to reach it from here (0.0.0.0 and :: become loopback).
std::string server_url(const ServerEntry& e);

}  // namespace zinc::cli
