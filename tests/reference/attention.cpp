#include "tests/reference/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/dtype.hpp"

namespace gptvk::cpu {

void kv_append(const std::vector<float>& qkv, std::vector<float>& k_cache, std::vector<float>& v_cache,
               uint32_t pos0, uint32_t T, ops::AttentionShape s) {
  const size_t C = size_t(s.n_heads) * s.head_dim;
  if (pos0 + T > s.context) throw std::logic_error("cpu::kv_append: past the end of the cache");
  // What an f16 cache holds: rounded to nearest even, saturated at f16's largest finite value.
  auto stored = [&](float x) { return s.kv_f16 ? f16_to_f32(f32_to_f16(std::clamp(x, -65504.0f, 65504.0f))) : x; };
  for (size_t t = 0; t < T; ++t)
    for (size_t h = 0; h < s.n_heads; ++h)
      for (size_t d = 0; d < s.head_dim; ++d) {
        const size_t c = h * s.head_dim + d, at = ops::kv_cache_index(s, h, pos0 + t, d);
        k_cache[at] = stored(qkv[t * 3 * C + C + c]);
        v_cache[at] = stored(qkv[t * 3 * C + 2 * C + c]);
      }
}

std::vector<float> attention(const std::vector<float>& qkv, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, uint32_t pos0, uint32_t T, ops::AttentionShape s) {
  const size_t C = size_t(s.n_heads) * s.head_dim, hd = s.head_dim;
  if (pos0 + T > s.context) throw std::logic_error("cpu::attention: past the end of the cache");
  const double scale = 1.0 / std::sqrt(double(hd));
  std::vector<float> out(T * C);
  std::vector<double> score;
  for (size_t t = 0; t < T; ++t)
    for (size_t h = 0; h < s.n_heads; ++h) {
      const size_t n = pos0 + t + 1;  // causal: keys 0..pos0+t
      const float* q = &qkv[t * 3 * C + h * hd];
      score.assign(n, 0.0);
      for (size_t j = 0; j < n; ++j) {
        double dot = 0;
        for (size_t d = 0; d < hd; ++d) dot += double(q[d]) * double(k_cache[ops::kv_cache_index(s, h, j, d)]);
        score[j] = dot * scale;
      }
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      for (size_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (size_t j = 0; j < n; ++j) acc += score[j] * double(v_cache[ops::kv_cache_index(s, h, j, d)]);
        out[t * C + h * hd + d] = float(acc / sum);
      }
    }
  return out;
}

}  // namespace gptvk::cpu
