// Register-blocked GEMM over Q8_0 / Q4_0 rows for CPU devices with subgroups
// (common/linear_gemm_bcast.glsl with the weights dequantized as they load): the
// workgroup is one subgroup, each invocation owns TN outputs for all TM = XT * LOCAL
// tokens; invocation c loads the inputs of tokens c, c + LOCAL, ... and subgroupShuffle
// with a constant index hands them to the others. Per block each invocation loads its
// rows' scales and data once; each group of 4 weights, decoded and scaled, serves TM tokens.
layout(constant_id = 7) const uint XT = 1;  // tokens loaded per invocation: TM = XT * LOCAL
layout(constant_id = 8) const uint TN = 4;  // outputs per invocation

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)
const uint TM = XT * LOCAL;

#define TOKEN(c)                                                                     \
  if (c < LOCAL) {                                                                   \
    for (uint s = 0u; s < XT; ++s) {                                                 \
      vec4 a = subgroupShuffle(xq[s], c);                                            \
      for (uint j = 0u; j < TN; ++j) acc[s * LOCAL + c][j] = fma4(wq[j], a, acc[s * LOCAL + c][j]); \
    }                                                                                \
  }

void main() {
  read_push_constants();
  uint lane = gl_SubgroupInvocationID;
  uint t0 = gl_WorkGroupID.x * TM;
  uint o0 = gl_WorkGroupID.y * (LOCAL * TN) + lane * TN;

  uint xr[XT];
  uint wr[TN];
  for (uint s = 0u; s < XT; ++s) xr[s] = min(t0 + s * LOCAL + lane, TOKENS - 1u) * K;  // clamped, dropped
  for (uint j = 0u; j < TN; ++j) wr[j] = min(o0 + j, ROWS - 1u) * W_STRIDE;
  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint b = 0u; b < QB; ++b) {
    float d[TN];
    for (uint j = 0u; j < TN; ++j) d[j] = q_scale(load_w(wr[j] + b / 8u), b);
    // One data word of each row at a time (Q8_0: weights 16 hw .. 16 hw + 15; Q4_0: the
    // block's one word, its low nibbles then its high ones), so fewer values stay live.
    [[unroll]] for (uint hw = 0u; hw < 2u; ++hw) {
      uvec4 p[TN][2];
      for (uint j = 0u; j < TN; ++j) {
        p[j][0] = Q4 ? load_w(wr[j] + QSW + b) : uvec4(0u);
        p[j][1] = Q4 ? p[j][0] : load_w(wr[j] + QSW + b * 2u + hw);
        if (!Q4) p[j][0] = p[j][1];
      }
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        uint h = hw * 4u + c;
        vec4 xq[XT];
        for (uint s = 0u; s < XT; ++s) xq[s] = load_x4(xr[s] + b * 32u + h * 4u);
        vec4 wq[TN];
        for (uint j = 0u; j < TN; ++j) wq[j] = q_quad(p[j], h) * d[j];
        TOKEN(0u) TOKEN(1u) TOKEN(2u) TOKEN(3u) TOKEN(4u) TOKEN(5u) TOKEN(6u) TOKEN(7u)
        TOKEN(8u) TOKEN(9u) TOKEN(10u) TOKEN(11u) TOKEN(12u) TOKEN(13u) TOKEN(14u) TOKEN(15u)
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
