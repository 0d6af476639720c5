#include "tests/support/ops/add.hpp"

#include "engine/vk/context.hpp"

namespace gptvk::ops {

void add(Graph& g, View a, View b, View y, uint32_t n, const std::string& name) {
  constexpr uint32_t local = 64;
  const auto& p = g.context().pipelines().get({"add", {local, n}, 3, 0});
  g.add({name, &p, {{a, Access::Read}, {b, Access::Read}, {y, Access::Write}}, {(n + local - 1) / local, 1, 1}, {}});
}

}  // namespace gptvk::ops
