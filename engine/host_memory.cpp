#include "engine/host_memory.hpp"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace gptvk {
namespace {

// The value of `key` (a "Name:" line in kB) in a /proc file; 0 when absent.
uint64_t proc_kib(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  uint64_t kib = 0;
  while (in >> name) {
    if (name == key && in >> kib) return kib;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

}  // namespace

uint64_t host_available_bytes() { return proc_kib("/proc/meminfo", "MemAvailable:") << 10; }

std::optional<uint64_t> address_space_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(r.rlim_cur);
}

std::optional<uint64_t> address_space_left() {
  const auto limit = address_space_limit();
  if (!limit) return std::nullopt;
  const uint64_t used = proc_kib("/proc/self/status", "VmSize:") << 10;
  return *limit > used ? *limit - used : 0;
}

}  // namespace gptvk
