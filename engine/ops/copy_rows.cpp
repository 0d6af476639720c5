#include "engine/ops/copy_rows.hpp"

#include "engine/vk/context.hpp"

namespace gptvk::ops {

void copy_rows(Graph& g, View src, View dst, uint32_t src_row, uint32_t rows, uint32_t cols,
               const std::string& name) {
  constexpr uint32_t local = 64;
  const auto& p = g.context().pipelines().get({"copy_rows", {local, cols}, 2, 8});
  uint32_t n = rows * cols;
  g.add({name, &p, {{src, Access::Read}, {dst, Access::Write}}, {(n + local - 1) / local, 1, 1}, {src_row, rows}});
}

}  // namespace gptvk::ops
