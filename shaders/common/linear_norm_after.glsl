// LN_AFTER (decode on CPU devices, shaders/common/linear_matvec_rows.glsl): the linear's
// output row y (one token, all ROWS outputs, this single dispatch) also goes through
// LayerNorm into ln_out, computed by whichever workgroup finishes last. That saves the
// LayerNorm its own dispatch, which on lavapipe costs ~45 us of thread wake-ups for ~3 us
// of work (GPT-2 small decode: 24 of ~88 dispatches per token).
// Same formula as shaders/layernorm.comp: two passes (mean, then squared deviations),
// biased variance.
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(constant_id = 8) const float LN_EPS = 1e-5;
layout(std430, binding = 6) readonly buffer LnGamma { float ln_gamma[]; };
layout(std430, binding = 7) readonly buffer LnBeta { float ln_beta[]; };
layout(std430, binding = 8) writeonly buffer LnOut { float ln_out[]; };
// Workgroups of this dispatch that have stored their outputs; the last one resets it to 0.
layout(std430, binding = 9) coherent buffer Arrived { uint arrived; };

void layernorm_if_last(uint lane) {
  // This workgroup's y stores (y is coherent here) before its arrival is counted.
  memoryBarrierBuffer();
  uint before = 0u;
  if (lane == 0u) before = atomicAdd(arrived, 1u);
  if (subgroupMax(before) != gl_NumWorkGroups.x - 1u) return;
  memoryBarrierBuffer();  // and every other workgroup's stores before the reads below

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
  if (lane == 0u) arrived = 0u;  // ready for the next run of the graph
}
