// Bias add and activation over a float matrix (tests/shaders/bias_act.comp): the unfused path;
// linear layers fuse the same epilogue into their GEMM.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/activation.hpp"

namespace gptvk::ops {

// y[r][c] = act(x[r][c] + bias[c]) for a rows x cols matrix; bias holds cols floats.
// y may alias x.
void bias_act(Graph& g, View x, View bias, View y, uint32_t rows, uint32_t cols, Activation act,
              const std::string& name = "bias_act");

}  // namespace gptvk::ops
