#include "tests/support/ops/softmax.hpp"

#include <stdexcept>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {
constexpr uint32_t kPasses = 2;  // loops over the row: running max and sum, output
}

void softmax(Graph& g, View x, View y, uint32_t rows, uint32_t cols, float scale, const std::string& name) {
  softmax(g, x, y, rows, cols, scale, row_reduce_shape(g.context(), cols, kPasses), name);
}

void softmax(Graph& g, View x, View y, uint32_t rows, uint32_t cols, float scale, const RowReduce& shape,
             const std::string& name) {
  uint64_t bytes = uint64_t(rows) * cols * 4;
  if (cols == 0) throw std::logic_error(name + ": cols must be positive");
  if (x.size() < bytes || y.size() < bytes) throw std::logic_error(name + ": x/y hold fewer than rows * cols floats");
  check_row_reduce_shape(g.context(), shape, cols, kPasses, name);
  if (rows == 0) return;
  const auto& p =
      g.context().pipelines().get({"softmax." + shape.variant(), {shape.local, cols, vk::spec_f32(scale)}, 2, 4});
  g.add({name, &p, {{x, Access::Read}, {y, Access::Write}}, row_groups(rows), {rows}});
}

}  // namespace gptvk::ops
