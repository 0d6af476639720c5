#include "tests/reference/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace gptvk::cpu {

std::vector<float> embed(const std::vector<float>& tok, const std::vector<float>& pos, uint32_t C,
                         const std::vector<uint32_t>& ids, uint32_t pos0) {
  const uint64_t tok_rows = C ? tok.size() / C : 0, pos_rows = C ? pos.size() / C : 0;
  std::vector<float> x(ids.size() * uint64_t(C));
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] >= tok_rows) throw std::out_of_range("token id " + std::to_string(ids[t]) + " past the vocabulary");
    if (pos0 + t >= pos_rows) throw std::out_of_range("position " + std::to_string(pos0 + t) + " past the context");
    for (uint32_t c = 0; c < C; ++c)
      x[t * C + c] = tok[uint64_t(ids[t]) * C + c] + pos[(pos0 + t) * C + c];
  }
  return x;
}

void layernorm(const float* x, const float* gamma, const float* beta, float* y, uint32_t rows, uint32_t C, float eps) {
  for (uint32_t r = 0; r < rows; ++r) {
    const float* xr = x + uint64_t(r) * C;
    float* yr = y + uint64_t(r) * C;
    double mean = 0;
    for (uint32_t c = 0; c < C; ++c) mean += xr[c];
    mean /= C;
    double var = 0;
    for (uint32_t c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= C;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (uint32_t c = 0; c < C; ++c) yr[c] = static_cast<float>((xr[c] - mean) * rstd * gamma[c] + beta[c]);
  }
}

float activate(float x, Activation act) {
  const double v = x;
  switch (act) {
    case Activation::None:
      return x;
    case Activation::GeluTanh:
      return static_cast<float>(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
    case Activation::GeluErf:
      return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    case Activation::Relu:
      return x > 0.0f ? x : 0.0f;
  }
  throw std::logic_error("unknown activation");
}

void bias_act(const float* x, const float* bias, float* y, uint32_t rows, uint32_t cols, Activation act) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c) y[r * cols + c] = activate(x[r * cols + c] + bias[c], act);
}

void softmax(const float* x, float* y, uint32_t rows, uint32_t cols, float scale) {
  std::vector<double> e(cols);
  for (uint64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double m = -INFINITY;
    for (uint32_t c = 0; c < cols; ++c) m = std::max(m, double(scale) * xr[c]);
    double sum = 0;
    for (uint32_t c = 0; c < cols; ++c) sum += e[c] = std::exp(double(scale) * xr[c] - m);
    for (uint32_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(e[c] / sum);
  }
}

}  // namespace gptvk::cpu
