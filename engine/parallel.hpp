// Host-side work split over the machine's cores: model loading transposes and converts
// ~10^8 weights, which one core does at a fraction of memory speed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace gptvk {

// Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel when each range
// gets at least min_per_thread items (at most 8 threads); returns when all are done.
// fn must not throw.
template <class F>
void parallel_for(size_t n, size_t min_per_thread, F fn) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({cores, size_t(8), std::max<size_t>(1, n / std::max<size_t>(1, min_per_thread))});
  if (threads <= 1) {
    fn(size_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t per = (n + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t) {
    const size_t b = std::min(n, t * per), e = std::min(n, b + per);
    if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(size_t(0), std::min(n, per));
  for (auto& th : pool) th.join();
}

}  // namespace gptvk
