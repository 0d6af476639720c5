// Argmax of a float vector (tests/shaders/argmax.comp): the sampler's greedy pick alone, which
// the tests check the order keys and tie rule of the sampler-family reductions with.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"

namespace gptvk::ops {

// out[0] = index of the max of x[0..n) (lowest index on ties), as a uint32.
void argmax(Graph& g, View x, View out, uint32_t n, const std::string& name = "argmax");

}  // namespace gptvk::ops
