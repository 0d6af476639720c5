#include "tests/support/ops/bias_act.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

void bias_act(Graph& g, View x, View bias, View y, uint32_t rows, uint32_t cols, Activation act,
              const std::string& name) {
  uint64_t bytes = uint64_t(rows) * cols * 4;
  if (x.size() < bytes || y.size() < bytes) throw std::logic_error(name + ": x/y hold fewer than rows * cols floats");
  if (bias.size() < uint64_t(cols) * 4) throw std::logic_error(name + ": bias holds fewer than cols floats");
  if (rows == 0 || cols == 0) return;
  // 4-wide accesses need rows of whole vec4s and 16-byte aligned bindings; they halve the
  // CPU time of relu and gelu on lavapipe at the GPT-2 MLP shape (1024 x 3072).
  const bool vec4 = cols % 4 == 0 && x.offset % 16 == 0 && bias.offset % 16 == 0 && y.offset % 16 == 0;
  const uint32_t width = vec4 ? 4 : 1, n = cols / width;
  constexpr uint32_t local = 64;
  // Enough row groups to fill a device (each walks rows with a stride), capped where each
  // would do only a few rows' worth of work anyway.
  uint32_t col_groups = (n + local - 1) / local;
  uint32_t row_groups = std::min<uint32_t>(rows, std::max<uint32_t>(1, 65536 / col_groups));
  row_groups = std::min<uint32_t>(row_groups, 65535);
  const auto& p = g.context().pipelines().get(
      {vec4 ? "bias_act.vec4" : "bias_act.scalar", {local, n, static_cast<uint32_t>(act)}, 3, 4});
  g.add({name, &p, {{x, Access::Read}, {bias, Access::Read}, {y, Access::Write}}, {col_groups, row_groups, 1}, {rows}});
}

}  // namespace gptvk::ops
