// The micro-benchmarks' main: the op measured on the device as it is, then under the
// forced limits CI's fallback pass uses (engine/vk/context.hpp, ForcedLimits).
#pragma once
#include <cstdio>

#include "engine/vk/context.hpp"

namespace gptvk::micro {

// Calls bench(context, label) for the native device and for the fallback limits.
template <typename Bench>
int run_native_and_fallback(Bench bench) {
  vk::Context native;
  std::printf("%s\n", native.summary().c_str());
  bench(native, "native");
  vk::ContextOptions fallback;
  fallback.forced = vk::ForcedLimits::parse("no_fp16,no_subgroup,shared=16K,max_range=64M");
  vk::Context small(fallback);
  bench(small, "fallback");
  return 0;
}

}  // namespace gptvk::micro
