// Byte counts in messages.
#pragma once
#include <cstdint>
#include <string>

namespace gptvk {

// MiB rounded up, so that what a model or a buffer needs is never understated.
inline std::string mib_ceil(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace gptvk
