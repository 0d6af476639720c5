// The register tile of the CPU GEMMs (common/linear_gemm_bcast.glsl,
// common/linear_gemm_reg.glsl), which define TM and TN first: acc[i][j] is token t0 + i,
// output o0 + j. Tokens and outputs past the end are clamped to valid rows and their
// results dropped, so the inner loops have no branches.

// The first words of the TN rows of W from output o0, and the accumulators at 0.
void start_tile(uint o0, out uint wr[TN], out float acc[TM][TN]) {
  for (uint j = 0u; j < TN; ++j) wr[j] = min(o0 + j, ROWS - 1u) * W_STRIDE;
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;
}

// Each output of the tile through store_y, from a loop that is not unrolled (see
// store_y). The loop indexes a copy by a variable, so that the accumulators themselves are
// indexed only by constants and stay in registers.
void store_tile(uint t0, uint o0, float acc[TM][TN]) {
  float res[TM * TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) res[i * TN + j] = acc[i][j];
  [[dont_unroll]] for (uint n = 0u; n < TM * TN; ++n) {
    uint t = t0 + n / TN, o = o0 + n % TN;
    if (t < TOKENS && o < ROWS) store_y(t, o, res[n]);
  }
}
