// CPU references for the element-wise and row ops: plain loops, written to be obviously
// right rather than fast. Tests compare the shaders against these; they also serve a CPU
// forward pass. All matrices are dense row-major floats.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/ops/activation.hpp"

namespace gptvk::cpu {

// x[t][c] = tok[ids[t]][c] + pos[pos0 + t][c]; tok and pos are dense [rows][C] tables
// (already rounded to the storage dtype). Throws std::out_of_range on an id or position
// past the end of its table.
std::vector<float> embed(const std::vector<float>& tok, const std::vector<float>& pos, uint32_t C,
                         const std::vector<uint32_t>& ids, uint32_t pos0);

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row, var the biased variance, as
// torch computes LayerNorm; sums in double. y may alias x.
void layernorm(const float* x, const float* gamma, const float* beta, float* y, uint32_t rows, uint32_t C, float eps);

// One activation value, computed in double: gelu tanh (GPT-2), exact gelu (std::erf), relu.
float activate(float x, Activation act);

// y[r][c] = act(x[r][c] + bias[c]); the add is one f32 add, as on the device. y may alias x.
void bias_act(const float* x, const float* bias, float* y, uint32_t rows, uint32_t cols, Activation act);

// y[r] = softmax(scale * x[r]) with the maximum subtracted, in double. y may alias x.
void softmax(const float* x, float* y, uint32_t rows, uint32_t cols, float scale = 1.0f);

}  // namespace gptvk::cpu
