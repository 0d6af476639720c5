#include "cli/profile_table.hpp"

#include <algorithm>
#include <cstdio>

namespace gptvk::cli {

void print_profile_table(const std::string& title, std::vector<OpTime> times) {
  double total = 0;
  bool products = false;
  for (const auto& t : times) total += t.ms, products = products || t.weight_bytes > 0;
  std::sort(times.begin(), times.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  std::fprintf(stderr, "\nGPU time per op, %s (total %.3f ms)%s:\n", title.c_str(), total,
               products ? "; products: weights read per second and arithmetic rate" : "");
  if (times.empty()) std::fprintf(stderr, "  (no timestamps: the device has no timestamp queries)\n");
  for (const auto& t : times) {
    std::fprintf(stderr, "  %-20s %9.3f ms  %5.1f%%  %4u dispatch%s", t.name.c_str(), t.ms,
                 total > 0 ? 100.0 * t.ms / total : 0.0, t.dispatches, t.dispatches == 1 ? "  " : "es");
    // bytes / ms * 1e-6 = GB/s; flops / ms * 1e-9 = TFLOP/s, printed in GFLOP/s
    if (t.weight_bytes > 0 && t.ms > 0)
      std::fprintf(stderr, "  %8.1f GB/s  %9.1f GFLOP/s", t.weight_bytes / t.ms * 1e-6, t.flops / t.ms * 1e-6);
    std::fputc('\n', stderr);
  }
}

}  // namespace gptvk::cli
