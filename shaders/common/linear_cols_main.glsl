// lanes_sum() and main() of the column-split mat-vecs (common/linear_matvec_cols.glsl and,
// over Q8_0 / Q4_0 blocks, common/linear_matvec_qcols.glsl): the including kernel defines
// hold_x(xrow, lane), which holds the lane's share of x's token row, and row_part(wrow,
// lane), the lane's part of the dot product with the W row starting at word wrow.
// The sum over the subgroup, in every lane: a shuffle with a lane-dependent index is one
// permute on lavapipe, where subgroupAdd is a loop over the lanes. A constant trip count
// makes the loop unroll (with `m <<= 1` as the step it stayed a loop, ~13 instructions a
// step, and decode was slower).
float lanes_sum(float v, uint lane) {
  [[unroll]] for (uint i = 0u; i < 6u; ++i)
    if ((1u << i) < LOCAL) v += subgroupShuffle(v, lane ^ (1u << i));
  return v;
}

void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  hold_x(t * K, lane);
  uint first = gl_WorkGroupID.x * LOCAL * R;
  // Neither loop is unrolled: lavapipe compiles the row's dot product once (unrolling the
  // inner one measured the same).
  [[dont_unroll]] for (uint g = 0u; g < R; ++g) {
    uint base = first + g * LOCAL;
    float mine = 0.0;
    [[dont_unroll]] for (uint i = 0u; i < LOCAL; ++i) {
      // Rows past the end are clamped (read a valid row, result dropped): no branch.
      float s = lanes_sum(row_part(min(base + i, ROWS - 1u) * W_STRIDE, lane), lane);
      mine = lane == i ? s : mine;
    }
    put_row(t, base + lane, mine);
  }
  after_rows(lane);
}
