// Whole numbers from flags and environment variables, strictly: only decimal digits, no
// sign, no spaces, no suffix, and no silent wrap or clamp (strtoull takes "-1" as 2^64-1
// and atoi takes "1abc" as 1).
#pragma once
#include <cstdint>
#include <string_view>

namespace gptvk {

// `s` as a number in [0, 2^64-1]; false when it is empty, has any non-digit or overflows.
inline bool parse_decimal_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(c - '0'), &v))
      return false;
  }
  out = v;
  return true;
}

}  // namespace gptvk
