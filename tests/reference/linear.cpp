#include "tests/reference/linear.hpp"

#include <cmath>
#include <stdexcept>

namespace gptvk::cpu {

double activation(double v, Activation act) {
  switch (act) {
    case Activation::None: return v;
    case Activation::GeluTanh: {
      const double c = std::sqrt(2.0 / M_PI);
      return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
    }
    case Activation::GeluErf: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::Relu: return v > 0.0 ? v : 0.0;
  }
  throw std::logic_error("cpu::activation: unknown activation");
}

void linear(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
            std::span<const float> r, std::span<float> y, uint32_t T, uint32_t in, uint32_t out, Activation act) {
  const size_t tin = size_t(T) * in, tout = size_t(T) * out;
  if (x.size() < tin || w.size() < size_t(out) * in || y.size() < tout || (!bias.empty() && bias.size() < out) ||
      (!r.empty() && r.size() < tout))
    throw std::invalid_argument("cpu::linear: a buffer is smaller than its shape");
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t o = 0; o < out; ++o) {
      double s = bias.empty() ? 0.0 : bias[o];
      const float* xr = x.data() + size_t(t) * in;
      const float* wr = w.data() + size_t(o) * in;
      for (uint32_t i = 0; i < in; ++i) s += double(xr[i]) * double(wr[i]);
      double v = activation(s, act);
      size_t idx = size_t(t) * out + o;
      if (!r.empty()) v += r[idx];  // read before y[idx] is written: r may be y
      y[idx] = static_cast<float>(v);
    }
}

}  // namespace gptvk::cpu
