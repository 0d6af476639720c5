// The micro-benchmarks' operands: deterministic uniform noise, the same values for a seed
// on every run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace gptvk::micro {

// n floats uniform in [-1, 1) from seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace gptvk::micro
