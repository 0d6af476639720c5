#version 450
#extension GL_GOOGLE_include_directive : require
// Next-token sampler: one workgroup picks one token from logits[VOCAB] and only its id leaves
// the device. Order (engine/cpu/sample.cpp is the same in plain C++):
//   logits / temperature -> top-k -> softmax -> top-p -> renormalise -> inverse CDF at u,
// u from Philox4x32-10 (key = seed, counter = step_rng), tokens taken in id order.
// No sort: both filters are thresholds on the float order key of the logits (dividing by a
// positive temperature keeps the order), found by a radix-16 search from the top bit down:
// each pass counts (top-k) or weighs (top-p) the tokens at or above 15 candidate keys at
// once and keeps the largest candidate that still holds enough, so 8 passes over the logits
// pin a threshold exactly. Ties at a threshold are all kept (top-k may keep more than k).
// The pick is a prefix sum: every invocation sums a contiguous chunk of weights, an
// exclusive scan places the chunks, and the chunk holding u * total scans its elements.
// temperature == 0 is greedy: the lowest index of the largest logit.
// BATCH != 0: workgroup j draws with counter step_rng + j into ids[j] and leaves the step
// buffer alone (tests and many-candidate draws); otherwise ids[0] gets the token and the
// step advances (pos += 1, rng += 1) so a recorded decode graph replays unchanged.
//! variant subgroup USE_SUBGROUP
//! variant shared
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint VOCAB = 1;
layout(constant_id = 2) const uint SLOTS = 1;           // see common/sample_reduce.glsl
layout(constant_id = 3) const uint BATCH = 0;
layout(constant_id = 4) const uint SCRATCH_STRIDE = 1;  // floats of scratch per workgroup

// Fixed per recorded graph (SamplingParams); push constants so a new seed needs no new pipeline.
layout(push_constant) uniform Params {
  float temperature;  // 0: greedy
  uint top_k;         // 0 or >= VOCAB: off
  float top_p;        // >= 1: off; > 0
  uint seed_lo;
  uint seed_hi;
} P;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };
#define STEP_BINDING 2
#include "common/step.glsl"
// Top-p weights cached between search passes; each invocation reads back only what it wrote.
layout(std430, binding = 3) buffer Scratch { float cached_weight[]; };

#include "common/philox.glsl"
#include "common/sample_reduce.glsl"

const uint RADIX_BITS = 2; const uint NC = 4;  // NSUM = 1 << RADIX_BITS candidates per pass

uint lid;
uint scratch_base;
float max_logit;

// Unnormalised probability of token i among those kept by `floor_key`.
float weight(uint i, uint floor_key) {
  float x = logits[i];
  return order_key(x) >= floor_key ? exp((x - max_logit) / P.temperature) : 0.0;
}

// The largest key t with F(t) >= target, where F(t) sums f_i over the tokens with key >= t.
// Top-k (by_mass false): f_i = 1, target = top_k, so t is the k-th largest key.
// Top-p (by_mass true): f_i = weight(i, lo), target = top_p * (sum of all f_i), so t is the
// smallest probability the nucleus needs. Requires F(lo) >= target and every key <= hi.
// Only the bits below the highest one where lo and hi differ are searched.
uint search_threshold(uint lo, uint hi, bool by_mass) {
  uint diff = lo ^ hi;
  if (diff == 0u) return lo;
  int shift = (findMSB(diff) / int(RADIX_BITS)) * int(RADIX_BITS);
  uint prefix = shift + int(RADIX_BITS) >= 32 ? 0u : hi & (0xFFFFFFFFu << uint(shift + int(RADIX_BITS)));
  float target = float(P.top_k);
  bool first = true;
  for (; shift >= 0; shift -= int(RADIX_BITS)) {
    uint cand[NSUM];
    for (uint j = 0; j < NC; ++j) cand[j] = prefix + (j << uint(shift));
    float acc[NSUM];
    for (uint j = 0; j < NSUM; ++j) acc[j] = 0.0;
    for (uint i = lid; i < VOCAB; i += gl_WorkGroupSize.x) {
      uint k = order_key(logits[i]);
      float f = 1.0;
      if (by_mass) {
        if (first) {
          f = weight(i, lo);
          cached_weight[scratch_base + i] = f;
        } else {
          f = cached_weight[scratch_base + i];
        }
      }
      for (uint j = 0; j < NC; ++j) acc[j] += k >= cand[j] ? f : 0.0;
    }
    wg_sum16(acc);
    // acc[0] is F(prefix); on the first pass prefix <= lo, so it is the total weight.
    if (by_mass && first) target = P.top_p * acc[0];
    uint digit = 0;
    for (uint j = NC - 1; j > 0; --j)
      if (acc[j] >= target) {
        digit = j;
        break;
      }
    prefix = cand[digit];
    first = false;
  }
  return prefix;
}

// Inverse CDF over the kept tokens in id order at u in [0, 1); returns the id on every invocation.
uint draw_token(uint floor_key, float u) {
  uint chunk = (VOCAB + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
  uint begin = min(lid * chunk, VOCAB), end = min(begin + chunk, VOCAB);
  float s = 0.0;
  for (uint i = begin; i < end; ++i) s += weight(i, floor_key);
  float total;
  float bound = wg_exclusive_scan(s, total);
  float target = u * total;
  // The last nonempty chunk that starts at or below the target holds it; the first nonempty
  // chunk starts at 0, so there always is one (rounding cannot leave a gap).
  uint owner = wg_max_u(s > 0.0 && bound <= target ? lid + 1 : 0u) - 1u;
  uint pick = 0;
  if (lid == owner) {
    // First kept token whose running sum passes the target; the chunk's last kept token if
    // rounding leaves the target at the chunk's very end.
    float run = bound;
    for (uint i = begin; i < end; ++i) {
      float w = weight(i, floor_key);
      if (w > 0.0) {
        run += w;
        pick = i;
        if (target < run) break;
      }
    }
  }
  return wg_max_u(lid == owner ? pick : 0u);
}

void main() {
  lid = gl_LocalInvocationID.x;
  uint draw = BATCH != 0 ? gl_WorkGroupID.x : 0u;
  scratch_base = draw * SCRATCH_STRIDE;
  uint counter = step_rng + draw;

  // One pass: the key range, and each invocation's lowest index holding its largest key.
  uint kmax = 0u, nkmin = 0u, nidx = 0u;
  for (uint i = lid; i < VOCAB; i += gl_WorkGroupSize.x) {
    uint k = order_key(logits[i]);
    if (k > kmax || i == lid) {
      kmax = k;
      nidx = ~i;
    }
    nkmin = max(nkmin, ~k);
  }
  uint wg_kmax = wg_max_u(kmax);
  uint kmin = ~wg_max_u(nkmin);

  uint token;
  if (P.temperature == 0.0) {
    token = ~wg_max_u(kmax == wg_kmax ? nidx : 0u);
  } else {
    max_logit = key_value(wg_kmax);
    uint floor_key = kmin;
    if (P.top_k > 0u && P.top_k < VOCAB) floor_key = search_threshold(kmin, wg_kmax, false);
    if (P.top_p < 1.0) floor_key = search_threshold(floor_key, wg_kmax, true);
    token = draw_token(floor_key, philox_uniform(uvec2(P.seed_lo, P.seed_hi), counter));
  }

  if (BATCH != 0) {
    if (lid == 0u) ids[draw] = token;
  } else {
    barrier();  // every invocation has read step_rng before it changes
    if (lid == 0u) {
      ids[0] = token;
      step_pos = step_pos + 1u;
      step_rng = counter + 1u;
    }
  }
}
