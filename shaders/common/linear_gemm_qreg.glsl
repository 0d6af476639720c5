// Register-blocked GEMM over Q8_0 / Q4_0 rows for CPU devices (common/linear_gemm_reg.glsl
// with the weights dequantized as they load): each invocation computes TM tokens x TN
// outputs; per block it loads its rows' scales and data words once, and each group of 4
// weights, decoded and scaled, serves all TM tokens. Lanes split the outputs.
layout(constant_id = 7) const uint TM = 8;  // tokens per invocation
layout(constant_id = 8) const uint TN = 8;  // outputs per invocation

void main() {
  read_push_constants();
  const uint LOCAL = gl_WorkGroupSize.x;
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.x * TM;
  uint o0 = gl_WorkGroupID.y * (LOCAL * TN) + lane * TN;

  uint xr[TM];
  uint wr[TN];
  for (uint i = 0u; i < TM; ++i) xr[i] = min(t0 + i, TOKENS - 1u) * K;  // clamped, results dropped
  for (uint j = 0u; j < TN; ++j) wr[j] = min(o0 + j, ROWS - 1u) * W_STRIDE;
  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint b = 0u; b < QB; ++b) {
    float d[TN];
    uvec4 p[TN][2];
    for (uint j = 0u; j < TN; ++j) {
      d[j] = q_scale(load_w(wr[j] + b / 8u), b);
      q_block(wr[j], b, p[j]);
    }
    [[unroll]] for (uint h = 0u; h < 8u; ++h) {
      vec4 xq[TM];
      for (uint i = 0u; i < TM; ++i) xq[i] = load_x4(xr[i] + b * 32u + h * 4u);
      for (uint j = 0u; j < TN; ++j) {
        vec4 wq = q_quad(p[j], h) * d[j];
        for (uint i = 0u; i < TM; ++i) acc[i][j] = fma4(wq, xq[i], acc[i][j]);
      }
    }
  }

  float res[TM * TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) res[i * TN + j] = acc[i][j];
  [[dont_unroll]] for (uint n = 0u; n < TM * TN; ++n) {
    uint t = t0 + n / TN, o = o0 + n % TN;
    if (t < TOKENS && o < ROWS) store_y(t, o, res[n]);
  }
}
