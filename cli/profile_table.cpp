#include "cli/profile_table.hpp"

#include <algorithm>
#include <cstdio>

namespace gptvk::cli {

void print_profile_table(const std::string& title, std::vector<OpTime> times) {
  double total = 0;
  for (const auto& t : times) total += t.ms;
  std::sort(times.begin(), times.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  std::fprintf(stderr, "\nGPU time per op, %s (total %.3f ms):\n", title.c_str(), total);
  if (times.empty()) std::fprintf(stderr, "  (no timestamps: the device has no timestamp queries)\n");
  for (const auto& t : times)
    std::fprintf(stderr, "  %-20s %9.3f ms  %5.1f%%  %4u dispatch%s\n", t.name.c_str(), t.ms,
                 total > 0 ? 100.0 * t.ms / total : 0.0, t.dispatches, t.dispatches == 1 ? "" : "es");
}

}  // namespace gptvk::cli
