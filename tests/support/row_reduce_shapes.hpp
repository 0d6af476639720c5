// Launch shapes for the row-reduction ops (LayerNorm, softmax) beyond the one the caps
// choose (8 lanes, one subgroup, on lavapipe): GPU-sized workgroups of several subgroups,
// trees over counts that are not powers of two, and a single invocation.
#pragma once
#include <vector>

#include "engine/ops/row_reduce.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::test {

inline std::vector<ops::RowReduce> row_reduce_launch_shapes(const vk::Context& ctx) {
  std::vector<ops::RowReduce> v;
  for (uint32_t local : {1u, 7u, 20u, 64u, 256u}) v.push_back({local, false});
  if (ctx.caps().subgroup_arithmetic)
    for (uint32_t n : {1u, 8u, 32u}) v.push_back({n * ctx.caps().subgroup_size, true});
  return v;
}

}  // namespace gptvk::test
