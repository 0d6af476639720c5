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

// Each output of the tile, as store_y() would store it. The row scale and bias of each of
// the TN outputs are loaded once for the TM tokens (on lavapipe every storage access is a
// loop over the lanes), applied to a copy of the accumulators, and then a loop that is not
// unrolled stores the copy: the activation, residual and store inlined once per output
// made most of the code that llvmpipe JIT-compiles at a pipeline's first dispatch
// (bench/PERFORMANCE.md, "Start to first token"). The loop indexes the copy by a variable,
// so that the accumulators themselves are indexed only by constants and stay in registers.
void store_tile(uint t0, uint o0, float acc[TM][TN]) {
  float res[TM * TN];
  for (uint j = 0u; j < TN; ++j) {
    OutputAffine a = output_affine(min(o0 + j, ROWS - 1u));
    for (uint i = 0u; i < TM; ++i) res[i * TN + j] = biased(a, unscaled(a, acc[i][j]));
  }
  [[dont_unroll]] for (uint n = 0u; n < TM * TN; ++n) {
    uint t = t0 + n / TN, o = o0 + n % TN;
    if (t < TOKENS && o < ROWS) activate_and_store(t, o, res[n]);
  }
}
