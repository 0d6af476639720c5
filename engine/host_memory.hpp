// What the host lets this process take: memory the kernel could hand out now, and the
// address space left under `ulimit -v` (RLIMIT_AS). On a CPU Vulkan device both bound the
// model's buffers, which are host memory mapped into this process.
#pragma once
#include <cstdint>
#include <optional>

namespace gptvk {

// MemAvailable from /proc/meminfo; 0 when unknown.
uint64_t host_available_bytes();

// The soft RLIMIT_AS in bytes; nullopt when there is none.
std::optional<uint64_t> address_space_limit();

// The address space still free under RLIMIT_AS (the limit less VmSize now); nullopt when
// there is no limit.
std::optional<uint64_t> address_space_left();

}  // namespace gptvk
