// Softmax over the rows of a float matrix (tests/shaders/softmax.comp).
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/row_reduce.hpp"

namespace gptvk::ops {

// y[r] = softmax(scale * x[r]) for each of `rows` rows of `cols` floats, computed with the
// row maximum subtracted. y may alias x.
void softmax(Graph& g, View x, View y, uint32_t rows, uint32_t cols, float scale = 1.0f,
             const std::string& name = "softmax");

// The same with the launch shape given instead of chosen from the caps (see RowReduce).
void softmax(Graph& g, View x, View y, uint32_t rows, uint32_t cols, float scale, const RowReduce& shape,
             const std::string& name = "softmax");

}  // namespace gptvk::ops
