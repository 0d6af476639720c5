// CPU reference of the linear layer (engine/ops/linear.hpp), for tests: plain loops with
// double accumulation, so it is the "exact" answer the GPU kernels are measured against.
#pragma once
#include <cstdint>
#include <span>

#include "engine/ops/activation.hpp"

namespace gptvk::cpu {

// y[t][o] = (r.empty() ? 0 : r[t][o]) + act(sum_i x[t][i] * w[o][i] + (bias.empty() ? 0 : bias[o])).
// x: [T][in], w: [out][in] (already rounded to the storage dtype), bias: [out] or empty,
// r: [T][out] or empty (may be the same memory as y), y: [T][out].
void linear(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
            std::span<const float> r, std::span<float> y, uint32_t T, uint32_t in, uint32_t out, Activation act);

// The activation in double precision (exact GELU via std::erf / std::tanh).
double activation(double v, Activation act);

}  // namespace gptvk::cpu
