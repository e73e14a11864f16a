// tests/cuda/trace/trace.h — the launch trace of the harness (trace_stubs.cpp records into it).
#pragma once
#include <string>
#include <vector>

namespace trace {
extern std::vector<std::string> lines;  // one line a launch / copy / sync
extern bool on;                         // recording
/// Give the device allocation that starts at p a name (pointers into it print as name+offset).
void name(const void* p, const std::string& n);
/// A host range (a GGUF tensor's bytes): a device allocation filled from it takes its name.
void host_name(const void* p, size_t n, const std::string& name);
std::string sym(const void* p);
void log(const std::string& s);
}  // namespace trace
