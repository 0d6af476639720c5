#include "cli/address_space.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "engine/error.hpp"
#include "engine/host_memory.hpp"

namespace gptvk::cli {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Written by the signal handler, which may only call async-signal-safe functions: the line
// is made before any signal can arrive.
char crash_line[256];
size_t crash_line_size = 0;

void on_crash(int sig) {
  ssize_t written = write(STDERR_FILENO, crash_line, crash_line_size);
  (void)written;
  raise(sig);  // SA_RESETHAND restored the default action: the process dies of sig
}

}  // namespace

void require_address_space() {
  const auto limit = address_space_limit();
  if (limit && *limit < kMinAddressSpace)
    throw InputError("the address-space limit (ulimit -v) is " + mib(*limit) + ", below the " + mib(kMinAddressSpace) +
                     " the Vulkan driver needs (its shader compiler and threads) before any model: raise it, e.g. "
                     "ulimit -v unlimited");
}

void explain_crashes_under_limit() {
  const auto limit = address_space_limit();
  if (!limit) return;
  const std::string line = "gpt-vk: crashed under an address-space limit (ulimit -v) of " + mib(*limit) +
                           ": the Vulkan driver crashes or aborts when it runs out of address space; try ulimit -v "
                           "unlimited\n";
  crash_line_size = std::min(line.size(), sizeof crash_line);
  std::memcpy(crash_line, line.data(), crash_line_size);
  struct sigaction action {};
  action.sa_handler = on_crash;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGABRT, &action, nullptr);
}

std::string with_address_space_note(const std::string& message) {
  const auto limit = address_space_limit();
  if (!limit || message.find("ulimit -v") != std::string::npos) return message;
  return message + " (the address-space limit, ulimit -v, is " + mib(*limit) +
         ": the Vulkan driver and the model may need more; try ulimit -v unlimited)";
}

}  // namespace gptvk::cli
