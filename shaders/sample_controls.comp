#version 450
#extension GL_GOOGLE_include_directive : require
// The sampling controls that rewrite the logits before the sampler (shaders/sample.comp)
// draws from them, in this order (engine/ops/sample_controls.hpp says it for users):
//   1. logit bias: x = logits[t] + bias[t] for every token
//   2. penalties on that biased x, over the last LAST_N tokens of the sequence's history
//      (prompt + generated): for each distinct token t there, with c its count in the window,
//        x = x > 0 ? x / repeat_penalty : x * repeat_penalty   (CTRL, llama.cpp)
//        x -= c * frequency_penalty + presence_penalty        (OpenAI)
// Bias first, as transformers' and llama.cpp's sampler chains have it: a penalty scales
// what the caller's bias made of the logit. min-p is not here: the sampler applies it after
// top-p, so that top-p's nucleus is measured on the distribution min-p has not cut.
// One workgroup; out[] gets the result, logits[] is left alone (log-probabilities read it).
// counts[] is all zero on entry and is left all zero: every token counted in the window is
// claimed back (atomicExchange) by the invocation that penalises it, once per distinct token.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint VOCAB = 1;
// Stages compiled in: bit 0 penalties, bit 1 logit bias.
layout(constant_id = 2) const uint CONTROLS = 3;
const bool PENALTIES = (CONTROLS & 1u) != 0u;
const bool BIAS = (CONTROLS & 2u) != 0u;

layout(push_constant) uniform Params {
  float repeat_penalty;     // 1: off
  float frequency_penalty;
  float presence_penalty;
  uint last_n;              // window; 0xFFFFFFFF: the whole history
} P;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) coherent buffer Out { float outv[]; };
// history[0]: tokens in the sequence so far, n; history[1 + i]: token i.
layout(std430, binding = 2) readonly buffer History { uint history[]; };
layout(std430, binding = 3) coherent buffer Counts { uint counts[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };

// Every result is kept finite: a bias or a penalty can take a logit past the float range
// (a large bias, a repeat penalty of 1e-45), and the sampler's softmax would make NaN of
// an infinity (inf - inf) and draw a token the controls ruled out. The largest float
// keeps the order the controls asked for.
const float FLOAT_MAX = 3.4028234663852886e38;
float finite(float x) { return clamp(x, -FLOAT_MAX, FLOAT_MAX); }

float biased(uint t, float x) { return BIAS ? finite(x + bias[t]) : x; }

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
      float x = biased(t, logits[t]);
      x = x > 0.0 ? x / P.repeat_penalty : x * P.repeat_penalty;
      outv[t] = finite(finite(x) - (float(c) * P.frequency_penalty + P.presence_penalty));
    }
  }
}
