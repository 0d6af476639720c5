// Register-blocked GEMM without shared memory (for CPU devices such as lavapipe, where
// a workgroup is one SIMD vector on one thread and shared memory and barriers only cost):
// each invocation computes a TM x TN block of y, TM tokens by TN outputs, reading x and W
// straight from the buffers (they stay in the CPU caches). Lanes are arranged LM along
// tokens by LOCAL / LM along outputs; workgroups walk tokens fastest (gl_WorkGroupID.x)
// so consecutive workgroups reuse the same rows of W while they are in cache.
layout(constant_id = 7) const uint TM = 4;   // tokens per invocation
layout(constant_id = 8) const uint TN = 4;  // outputs per invocation
layout(constant_id = 9) const uint LM = 1;  // invocations along tokens

void main() {
  read_push_constants();
  const uint LN = gl_WorkGroupSize.x / LM;
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.x * (LM * TM) + (lane % LM) * TM;
  uint o0 = gl_WorkGroupID.y * (LN * TN) + (lane / LM) * TN;

  // Out-of-range tokens and outputs are clamped to valid rows and their results dropped,
  // so the inner loop has no branches.
  uint xr[TM];
  uint wr[TN];
  for (uint i = 0u; i < TM; ++i) xr[i] = min(t0 + i, TOKENS - 1u) * K;
  for (uint j = 0u; j < TN; ++j) wr[j] = min(o0 + j, ROWS - 1u) * W_STRIDE;
  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint q = 0u; q < K_FULL; ++q) {
    vec4 x_lo[TM], x_hi[TM];
    for (uint i = 0u; i < TM; ++i) {
      x_lo[i] = load_x4(xr[i] + q * KW);
      x_hi[i] = KW == 8u ? load_x4(xr[i] + q * KW + 4u) : vec4(0.0);
    }
    for (uint j = 0u; j < TN; ++j) {
      vec4 lo, hi;
      decode(w[wr[j] + q], lo, hi);
      for (uint i = 0u; i < TM; ++i) {
        acc[i][j] = fma4(lo, x_lo[i], acc[i][j]);
        if (KW == 8u) acc[i][j] = fma4(hi, x_hi[i], acc[i][j]);
      }
    }
  }
  if (K_TAIL > 0u) {
    vec4 x_lo[TM], x_hi[TM];
    for (uint i = 0u; i < TM; ++i) load_x_word(xr[i], K_FULL, x_lo[i], x_hi[i]);
    for (uint j = 0u; j < TN; ++j)
      for (uint i = 0u; i < TM; ++i) acc[i][j] = word_dot(w[wr[j] + K_FULL], x_lo[i], x_hi[i], acc[i][j]);
  }

  float res[TM * TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) res[i * TN + j] = acc[i][j];
  [[dont_unroll]] for (uint n = 0u; n < TM * TN; ++n) {
    uint t = t0 + n / TN, o = o0 + n % TN;
    if (t < TOKENS && o < ROWS) store_y(t, o, res[n]);
  }
}
