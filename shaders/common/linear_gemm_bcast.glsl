// Register-blocked GEMM for CPU devices with subgroup operations. On lavapipe (Mesa 22)
// every storage-buffer load inside a loop is a loop over the 8 lanes with a bounds check
// per component (~40 instructions per lane for a vec4), so loads, not FMAs, bound the
// GEMM. Here the workgroup is one subgroup; each invocation owns TN outputs (its own rows
// of W) and computes them for all TM = XT * LOCAL tokens of the workgroup: invocation c
// loads the inputs of tokens c, c + LOCAL, ... once, and subgroupShuffle with a constant
// index (one vpermd on lavapipe) hands them to the others, instead of every invocation
// loading every token's inputs itself.
layout(constant_id = 7) const uint XT = 1;   // tokens loaded per invocation: TM = XT * LOCAL
layout(constant_id = 8) const uint TN = 4;  // outputs per invocation

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)
const uint TM = XT * LOCAL;

// Tokens c, c + LOCAL, ...: the inputs of half h (elements 4h..4h+3 of the word) from
// invocation c, times the decoded weights of that half. A macro, so that c is a constant.
#define TOKEN(c)                                                                       \
  if (c < LOCAL) {                                                                     \
    for (uint s = 0u; s < XT; ++s) {                                                   \
      vec4 a = subgroupShuffle(h == 0u ? x_lo[s] : x_hi[s], c);                      \
      for (uint j = 0u; j < TN; ++j) acc[s * LOCAL + c][j] = fma4(wd[j], a, acc[s * LOCAL + c][j]);           \
    }                                                                                  \
  }

void main() {
  read_push_constants();
  uint lane = gl_SubgroupInvocationID;
  uint t0 = gl_WorkGroupID.x * TM;
  uint o0 = gl_WorkGroupID.y * (LOCAL * TN) + lane * TN;

  // Out-of-range tokens and outputs are clamped to valid rows and their results dropped.
  uint xr[XT];
  uint wr[TN];
  for (uint s = 0u; s < XT; ++s) xr[s] = min(t0 + s * LOCAL + lane, TOKENS - 1u) * K;
  for (uint j = 0u; j < TN; ++j) wr[j] = min(o0 + j, ROWS - 1u) * W_STRIDE;
  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint q = 0u; q < K_WORDS; ++q) {
    vec4 x_lo[XT], x_hi[XT];
    if (K_TAIL == 0u) {
      for (uint s = 0u; s < XT; ++s) {
        x_lo[s] = load_x4(xr[s] + q * KW);
        x_hi[s] = KW == 8u ? load_x4(xr[s] + q * KW + 4u) : vec4(0.0);
      }
    } else {
      for (uint s = 0u; s < XT; ++s) load_x_word(xr[s], q, x_lo[s], x_hi[s]);
    }
    vec4 lo[TN], hi[TN];
    for (uint j = 0u; j < TN; ++j) decode(load_w(wr[j] + q), lo[j], hi[j]);
    for (uint h = 0u; h < (KW == 8u ? 2u : 1u); ++h) {
      vec4 wd[TN];
      for (uint j = 0u; j < TN; ++j) wd[j] = h == 0u ? lo[j] : hi[j];
      TOKEN(0u) TOKEN(1u) TOKEN(2u) TOKEN(3u) TOKEN(4u) TOKEN(5u) TOKEN(6u) TOKEN(7u)
      TOKEN(8u) TOKEN(9u) TOKEN(10u) TOKEN(11u) TOKEN(12u) TOKEN(13u) TOKEN(14u) TOKEN(15u)
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
