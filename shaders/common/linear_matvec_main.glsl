// main() of the split-K mat-vecs (common/linear_matvec.glsl and, over Q8_0 / Q4_0 blocks,
// common/linear_matvec_q.glsl): a workgroup computes R consecutive outputs of token
// gl_WorkGroupID.y. The including kernel defines lane_sums(xrow, wrow, lane, acc), the
// invocation's share of the inputs into its NSUM partial sums, and put_sum(t, row, i),
// which stores output `row` from the workgroup's sums (total(i) and on,
// common/linear_matvec_sums.glsl).
void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  uint row0 = gl_WorkGroupID.x * R;

  // Rows past the end are clamped (read a valid row, result dropped) so the loop has no branch.
  uint wrow[R];
  float acc[NSUM];
  for (uint i = 0u; i < R; ++i) wrow[i] = min(row0 + i, ROWS - 1u) * W_STRIDE;
  for (uint i = 0u; i < NSUM; ++i) acc[i] = 0.0;
  lane_sums(t * K, wrow, lane, acc);

  reduce_sums(acc, lane);
  // Only the lanes that store a row read the sums back (on lavapipe every shared-memory
  // read is a loop over the lanes).
  for (uint i = lane; i < R; i += LOCAL)
    if (row0 + i < ROWS) put_sum(t, row0 + i, i);
}
