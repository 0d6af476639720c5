#include "engine/ops/copy_rows.hpp"

#include <stdexcept>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

void copy_rows(Graph& g, View src, View dst, uint32_t src_row, uint32_t rows, uint32_t cols,
               const std::string& name, uint32_t dst_row) {
  constexpr uint32_t local = 64;
  const bool cpu = g.context().cpu_kernels();
  if (dst.size() < (uint64_t(dst_row) + rows) * cols * 4) throw std::logic_error(name + ": dst smaller than its rows");
  // vec4 units on CPU devices, where both views start on whole vec4s (they do in the models)
  // and so does dst's first row.
  const bool vector = cpu && src.offset % 16 == 0 && dst.offset % 16 == 0 && uint64_t(dst_row) * cols % 4 == 0;
  const auto& p = g.context().pipelines().get({"copy_rows", {local, cols, vector ? 1u : 0u}, 4, 12});
  const uint32_t n = rows * cols;
  // lavapipe runs each workgroup as a call of the JIT-compiled shader on one of its
  // threads, a cost of its own: CPU devices get a workgroup per kCpuElements elements
  // (each invocation loops, at most kCpuElements / local times, well below llvmpipe's
  // cap on loop iterations), GPUs one invocation per element.
  constexpr uint32_t kCpuElements = 16384;
  const uint32_t groups = cpu ? (n + kCpuElements - 1) / kCpuElements : (n + local - 1) / local;
  g.add({name, &p, {{src, Access::Read}, {dst, Access::Write}, {src, Access::Read}, {dst, Access::Write}},
         {groups, 1, 1}, {src_row, rows, dst_row}});
}

}  // namespace gptvk::ops
