// Launch shape for the row-reduction shaders (shaders/common/reduce.glsl users: layernorm,
// softmax): one workgroup per row, its size and reduction variant chosen from the caps.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

struct RowReduce {
  uint32_t local = 64;     // workgroup size (specialization constant 0)
  bool subgroup = false;   // reduce with subgroup arithmetic, else a shared-memory tree
  // Shader variant suffix: "subgroup" or "shared".
  std::string variant() const { return subgroup ? "subgroup" : "shared"; }
};

// llvmpipe (lavapipe) stops every loop of a shader invocation once the invocation has run
// 65535 loop iterations in total, all loops counted together (LP_MAX_TGSI_LOOP_ITERATIONS),
// without any error: the rest of the work is silently skipped. A row op whose invocations
// each walk `passes` times over cols / local elements must stay below that, with room for
// the reduction's own loops.
constexpr uint64_t kCpuLoopBudget = 65535 - 1024;

inline uint64_t row_loop_iterations(uint32_t cols, uint32_t passes, uint32_t local) {
  return uint64_t(passes) * ((uint64_t(cols) + local - 1) / local);
}

// CPU devices (lavapipe) run a workgroup on one thread as SIMD of subgroup_size lanes: a
// wider workgroup adds no parallelism, only barriers, so the workgroup is one subgroup (and
// the reduction needs no shared memory) unless the row is so wide that each invocation's
// loops would hit the loop budget above. GPUs get 256 invocations to keep a row's loads
// wide. `passes` is how many times the shader loops over a row of `cols`.
inline RowReduce row_reduce_shape(const vk::Context& ctx, uint32_t cols, uint32_t passes) {
  const auto& caps = ctx.caps();
  const uint32_t sg = std::max(caps.subgroup_size, 1u);
  const uint32_t cap = std::min(caps.max_workgroup_invocations, caps.shared_memory_bytes / 4);
  RowReduce r;
  r.subgroup = caps.subgroup_arithmetic;
  if (ctx.cpu_kernels()) {
    r.local = sg;
    while (row_loop_iterations(cols, passes, r.local) > kCpuLoopBudget && r.local * 2 <= cap) r.local *= 2;
  } else {
    r.local = std::max(256u, sg);
  }
  r.local = std::min(r.local, cap);
  // Subgroup reductions use whole subgroups only (see shaders/common/reduce.glsl).
  if (r.subgroup && r.local % sg) r.subgroup = false;
  return r;
}

// Throws std::logic_error when `ctx` cannot run `shape` (an explicitly chosen shape).
inline void check_row_reduce_shape(const vk::Context& ctx, const RowReduce& shape, uint32_t cols, uint32_t passes,
                                   const std::string& name) {
  const auto& caps = ctx.caps();
  if (shape.subgroup && !caps.subgroup_arithmetic)
    throw std::logic_error(name + ": subgroup reduction on a device without subgroup arithmetic");
  if (shape.subgroup && shape.local % std::max(caps.subgroup_size, 1u))
    throw std::logic_error(name + ": subgroup reduction needs a workgroup of whole subgroups");
  if (shape.local == 0 || shape.local > caps.max_workgroup_invocations || shape.local * 4ull > caps.shared_memory_bytes)
    throw std::logic_error(name + ": workgroup size " + std::to_string(shape.local) + " does not fit the device");
  // The loop limit is lavapipe's, whichever kernel family runs on it: the device type decides.
  if (ctx.info().is_cpu() && row_loop_iterations(cols, passes, shape.local) > kCpuLoopBudget)
    throw std::logic_error(name + ": workgroup size " + std::to_string(shape.local) + " leaves each invocation " +
                           std::to_string(row_loop_iterations(cols, passes, shape.local)) +
                           " loop iterations, past the CPU device's loop limit");
}

// Workgroup grid for one workgroup per row: rows past the 65535 limit of one grid dimension
// spill into the second; shaders compute row = id.x + id.y * num.x and skip rows >= rows.
inline std::array<uint32_t, 3> row_groups(uint32_t rows) {
  constexpr uint32_t kMax = 65535;
  uint32_t x = std::max(1u, std::min(rows, kMax));
  return {x, std::max(1u, (rows + kMax - 1) / kMax), 1};
}

}  // namespace gptvk::ops
