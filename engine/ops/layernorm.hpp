// LayerNorm over the rows of a float activation matrix (shaders/layernorm.comp).
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/row_reduce.hpp"

namespace gptvk::ops {

// y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta for each of `rows` rows of C floats,
// var the biased variance. gamma and beta hold C floats. y may alias x.
void layernorm(Graph& g, View x, View gamma, View beta, View y, uint32_t rows, uint32_t C, float eps,
               const std::string& name = "layernorm");

// The same with the launch shape given instead of chosen from the caps (tests run GPU-sized
// workgroups on a CPU device this way). Throws std::logic_error if the device cannot run it.
void layernorm(Graph& g, View x, View gamma, View beta, View y, uint32_t rows, uint32_t C, float eps,
               const RowReduce& shape, const std::string& name = "layernorm");

}  // namespace gptvk::ops
