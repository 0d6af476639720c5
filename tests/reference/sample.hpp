// CPU reference for token sampling (engine/ops/sample.hpp): the same semantics, computed
// the plain way (a sort for the filters, double precision for the probabilities), and the
// same Philox4x32-10 draws, so tests can check the device's choice token by token.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace gptvk::ops {
struct SamplingParams;  // engine/ops/sample.hpp
}

namespace gptvk::cpu {

// Philox4x32-10 (Salmon et al., SC 2011), as in Random123.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// The sampler's uniform in [0, 1) for step counter `rng`: the top 24 bits of the first word
// of Philox(counter = {rng, 0, 0, 0}, key = seed), divided by 2^24.
float sample_uniform(uint64_t seed, uint32_t rng);

// Order-preserving uint key of a float (-0 and +0 share one); the filters compare these.
uint32_t order_key(float x);

// Lowest index of the largest x[i].
uint32_t argmax(const float* x, uint32_t n);

// The distribution the sampler draws from, in id order: 0 for filtered tokens (top-k,
// top-p, then min-p), the kept ones renormalised to sum to 1. temperature 0: all mass on
// the argmax. The bias and penalties are not modelled here (tests apply them first).
std::vector<double> sampling_probs(const float* logits, uint32_t vocab, const ops::SamplingParams& p);

// Inverse CDF in id order: the first token whose cumulative probability exceeds u (the last
// kept token if rounding leaves u above the total).
uint32_t pick(const std::vector<double>& probs, double u);

// Whether the device's pick `got` is the reference's pick `want` for the same u, or both sit
// on either side of a CDF step within 1e-6 of u (float sums on the device, double here).
bool agrees_at_a_cdf_step(const std::vector<double>& probs, double u, uint32_t got, uint32_t want);

// What ops::sample picks from these logits with step counter `rng`.
uint32_t sample(const float* logits, uint32_t vocab, const ops::SamplingParams& p, uint32_t rng);

}  // namespace gptvk::cpu
