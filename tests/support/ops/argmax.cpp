#include "tests/support/ops/argmax.hpp"

#include <stdexcept>

#include "engine/ops/sample_shape.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

void argmax(Graph& g, View x, View out, uint32_t n, const std::string& name) {
  if (n == 0) throw std::logic_error("dispatch '" + name + "': argmax of nothing");
  require_bytes(x, uint64_t(n) * 4, "x", name);
  require_bytes(out, 4, "out", name);
  const SamplerShape s = sampler_shape(g.context(), n);
  const auto& pipe = g.context().pipelines().get({s.variant("argmax"), {s.local, n, s.slots}, 2, 0});
  g.add({name, &pipe, {{x, Access::Read}, {out, Access::Write}}, {1, 1, 1}, {}});
}

}  // namespace gptvk::ops
