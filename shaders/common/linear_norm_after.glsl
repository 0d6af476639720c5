// LN_AFTER (decode on CPU devices, shaders/common/linear_matvec_rows.glsl): the linear's
// output row y (one token, all ROWS outputs, this single dispatch) also goes through
// LayerNorm into ln_out, computed by whichever workgroup finishes last. That saves the
// LayerNorm its own dispatch, which on lavapipe costs far more in thread wake-ups than the
// LayerNorm's own work (GPT-2 small decode: 24 of ~88 dispatches per token;
// bench/PERFORMANCE.md, "What a dispatch costs").
// Same formula as shaders/layernorm.comp: two passes (mean, then squared deviations),
// biased variance.
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(constant_id = 8) const float LN_EPS = 1e-5;
layout(std430, binding = 6) readonly buffer LnGamma { float ln_gamma[]; };
layout(std430, binding = 7) readonly buffer LnBeta { float ln_beta[]; };
layout(std430, binding = 8) writeonly buffer LnOut { float ln_out[]; };
#include "common/last_arrival.glsl"

void layernorm_if_last(uint lane) {
  if (!last_to_arrive(lane)) return;  // y is coherent here: every workgroup's row is visible

  const uint n = ROWS;
  float s = 0.0;
  for (uint c = lane; c < n; c += LOCAL) s += y[c];
  float mean = subgroupAdd(s) / float(n);
  float q = 0.0;
  for (uint c = lane; c < n; c += LOCAL) {
    float d = y[c] - mean;
    q += d * d;
  }
  float rstd = 1.0 / sqrt(subgroupAdd(q) / float(n) + LN_EPS);
  for (uint c = lane; c < n; c += LOCAL) ln_out[c] = (y[c] - mean) * rstd * ln_gamma[c] + ln_beta[c];
  if (lane == 0u) arrival_reset();
}
