#version 450
#extension GL_GOOGLE_include_directive : require
// The sampling controls that reshape the logits before the sampler (shaders/sample.comp)
// draws from them, in this order (engine/ops/sample_controls.hpp says it for users):
//   1. penalties over the last LAST_N tokens of the sequence's history (prompt + generated):
//      for each distinct token t there, with c its count in the window,
//        x = logits[t];  x = x > 0 ? x / repeat_penalty : x * repeat_penalty   (CTRL, llama.cpp)
//        x -= c * frequency_penalty + presence_penalty                       (OpenAI)
//   2. logit bias: x += bias[t] for every token
//   3. min-p: tokens whose x < max(x) + ln(min_p) become -inf (p < min_p * p_max at temperature 1)
// One workgroup; out[] gets the result, logits[] is left alone (log-probabilities read it).
// counts[] is all zero on entry and is left all zero: every token counted in the window is
// claimed back (atomicExchange) by the invocation that penalises it, once per distinct token.
//! variant subgroup USE_SUBGROUP
//! variant shared
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint VOCAB = 1;
layout(constant_id = 2) const uint SLOTS = 1;     // see common/sample_reduce.glsl
// Stages compiled in: bit 0 penalties, bit 1 logit bias, bit 2 min-p.
layout(constant_id = 3) const uint CONTROLS = 7;
const bool PENALTIES = (CONTROLS & 1u) != 0u;
const bool BIAS = (CONTROLS & 2u) != 0u;
const bool MIN_P = (CONTROLS & 4u) != 0u;

layout(push_constant) uniform Params {
  float repeat_penalty;     // 1: off
  float frequency_penalty;
  float presence_penalty;
  uint last_n;              // window; 0xFFFFFFFF: the whole history
  float log_min_p;          // ln(min_p)
} P;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) coherent buffer Out { float outv[]; };
// history[0]: tokens in the sequence so far, n; history[1 + i]: token i.
layout(std430, binding = 2) readonly buffer History { uint history[]; };
layout(std430, binding = 3) coherent buffer Counts { uint counts[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };

#include "common/sample_reduce.glsl"

float biased(uint t, float x) { return BIAS ? x + bias[t] : x; }

void main() {
  const uint lid = gl_LocalInvocationID.x, size = gl_WorkGroupSize.x;
  for (uint i = lid; i < VOCAB; i += size) outv[i] = biased(i, logits[i]);

  if (PENALTIES) {
    const uint n = min(history[0], uint(history.length()) - 1u);
    const uint begin = P.last_n >= n ? 0u : n - P.last_n;
    for (uint j = begin + lid; j < n; j += size) {
      uint t = history[1u + j];
      if (t < VOCAB) atomicAdd(counts[t], 1u);
    }
    memoryBarrierBuffer();
    barrier();
    for (uint j = begin + lid; j < n; j += size) {
      uint t = history[1u + j];
      if (t >= VOCAB) continue;
      uint c = atomicExchange(counts[t], 0u);
      if (c == 0u) continue;  // another invocation has this token
      float x = logits[t];
      x = x > 0.0 ? x / P.repeat_penalty : x * P.repeat_penalty;
      x -= float(c) * P.frequency_penalty + P.presence_penalty;
      outv[t] = biased(t, x);
    }
  }

  if (MIN_P) {
    memoryBarrierBuffer();
    barrier();
    uint kmax = 0u;
    for (uint i = lid; i < VOCAB; i += size) kmax = max(kmax, order_key(outv[i]));
    const float floor_value = key_value(wg_max_u(kmax)) + P.log_min_p;
    for (uint i = lid; i < VOCAB; i += size)
      if (outv[i] < floor_value) outv[i] = uintBitsToFloat(0xFF800000u);  // -inf
  }
}
