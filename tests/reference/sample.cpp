#include "tests/reference/sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/ops/sample.hpp"  // SamplingParams (the header also declares the device op)

namespace gptvk::cpu {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
  }
  return c;
}

float sample_uniform(uint64_t seed, uint32_t rng) {
  auto r = philox4x32_10({rng, 0, 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
  return float(r[0] >> 8) * (1.0f / 16777216.0f);
}

uint32_t order_key(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

uint32_t argmax(const float* x, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

std::vector<double> sampling_probs(const float* logits, uint32_t vocab, const ops::SamplingParams& p) {
  ops::check_sampling_params(p);
  std::vector<double> w(vocab, 0.0);
  if (p.temperature == 0) {
    w[argmax(logits, vocab)] = 1.0;
    return w;
  }
  std::vector<uint32_t> key(vocab);
  for (uint32_t i = 0; i < vocab; ++i) key[i] = order_key(logits[i]);
  // Ids by decreasing logit; ties in id order (irrelevant: ties are kept or dropped together).
  std::vector<uint32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key[a] > key[b]; });

  // Top-k: keep every token whose logit is >= the k-th largest (all of a tie).
  uint32_t floor_key = 0;
  if (p.top_k > 0 && p.top_k < vocab) floor_key = key[order[p.top_k - 1]];

  // Softmax of logits / temperature over the kept tokens (unnormalised: exp(z - max z)).
  double x_max = logits[order[0]];
  double total = 0;
  for (uint32_t i = 0; i < vocab; ++i)
    if (key[i] >= floor_key) total += w[i] = std::exp((double(logits[i]) - x_max) / double(p.temperature));

  // Top-p: walk down the sorted order; the nucleus ends at the first distinct logit where
  // the mass of all tokens at or above it reaches top_p (of top-k's survivors, before
  // min-p drops any).
  if (p.top_p < 1.0f) {
    double target = double(p.top_p) * total, mass = 0;
    for (uint32_t r = 0; r < vocab && key[order[r]] >= floor_key; ++r) {
      mass += w[order[r]];
      bool last_of_tie = r + 1 == vocab || key[order[r + 1]] != key[order[r]];
      if (last_of_tie && mass >= target) {
        floor_key = key[order[r]];
        break;
      }
    }
  }
  // Min-p, on the whole distribution's top logit (which every filter keeps) at temperature
  // 1: in float, as the device adds the host's float ln(min_p) to it.
  if (p.min_p > 0) floor_key = std::max(floor_key, order_key(logits[order[0]] + std::log(p.min_p)));
  total = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (key[i] < floor_key) w[i] = 0;
    total += w[i];
  }
  for (auto& v : w) v /= total;
  return w;
}

uint32_t pick(const std::vector<double>& probs, double u) {
  double cum = 0;
  uint32_t last = 0;
  for (uint32_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0) {
      cum += probs[i];
      last = i;
      if (u < cum) return i;
    }
  return last;
}

bool agrees_at_a_cdf_step(const std::vector<double>& probs, double u, uint32_t got, uint32_t want) {
  if (got == want) return true;
  if (got >= probs.size() || probs[got] == 0) return false;
  uint32_t lo = std::min(got, want), hi = std::max(got, want);
  double through_lo = 0, before_hi = 0;
  for (uint32_t i = 0; i < hi; ++i) {
    if (i <= lo) through_lo += probs[i];
    before_hi += probs[i];
  }
  return std::fabs(through_lo - u) <= 1e-6 && std::fabs(before_hi - u) <= 1e-6;
}

uint32_t sample(const float* logits, uint32_t vocab, const ops::SamplingParams& p, uint32_t rng) {
  if (p.temperature == 0) return argmax(logits, vocab);
  return pick(sampling_probs(logits, vocab, p), sample_uniform(p.seed, rng));
}

}  // namespace gptvk::cpu
