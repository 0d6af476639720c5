// main() of the split-K mat-vecs (common/linear_matvec.glsl and, over Q8_0 / Q4_0 blocks,
// common/linear_matvec_q.glsl): a workgroup computes R consecutive outputs of the TB tokens
// from TB * gl_WorkGroupID.y. The including kernel defines lane_sums(xrows, wrow, lane,
// acc), the invocation's share of the inputs into its NSUM partial sums per token, and
// put_sum(t, row, i), which stores output `row` from the workgroup's sums (total(i) and
// on, common/linear_matvec_sums.glsl). Each token's sums are reduced on their own, in the
// order a lone token's are, so a token's outputs do not depend on TB or its neighbours.
void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.y * TB;
  uint row0 = gl_WorkGroupID.x * R;

  // Rows and tokens past the end are clamped (read a valid one, result dropped) so the
  // loop has no branch.
  uint wrow[R], xrows[TB];
  float acc[TB][NSUM];
  for (uint i = 0u; i < R; ++i) wrow[i] = min(row0 + i, ROWS - 1u) * W_STRIDE;
  for (uint j = 0u; j < TB; ++j) {
    xrows[j] = min(t0 + j, TOKENS - 1u) * K;
    for (uint i = 0u; i < NSUM; ++i) acc[j][i] = 0.0;
  }
  lane_sums(xrows, wrow, lane, acc);

  for (uint j = 0u; j < TB; ++j) {
    if (j > 0u) barrier();  // the previous token's sums are read back before these replace them
    reduce_sums(acc[j], lane);
    // Only the lanes that store a row read the sums back (on lavapipe every shared-memory
    // read is a loop over the lanes).
    for (uint i = lane; i < R; i += LOCAL)
      if (row0 + i < ROWS && t0 + j < TOKENS) put_sum(t0 + j, row0 + i, i);
  }
}
