// lanes_sum() and main() of the column-split mat-vecs (common/linear_matvec_cols.glsl and,
// over Q8_0 / Q4_0 blocks, common/linear_matvec_qcols.glsl): the including kernel defines
// hold_x(xrow, lane, at), which holds the lane's share of x's token row from xc[at], and
// row_part(wrow, lane), the lane's part of the dot product with the W row starting at word
// wrow; with COLS_BATCH, row_parts(wrow, lane, acc), that part for each of NB held tokens.
// The sum over the subgroup, in every lane: a shuffle with a lane-dependent index is one
// permute on lavapipe, where subgroupAdd is a loop over the lanes. A constant trip count
// makes the loop unroll (with `m <<= 1` as the step it stays a loop, ~13 instructions a
// step).
float lanes_sum(float v, uint lane) {
  [[unroll]] for (uint i = 0u; i < 6u; ++i)
    if ((1u << i) < LOCAL) v += subgroupShuffle(v, lane ^ (1u << i));
  return v;
}

#ifndef COLS_BATCH
void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  hold_x(t * K, lane, 0u);
  uint first = gl_WorkGroupID.x * LOCAL * R;
  // Neither loop is unrolled: lavapipe compiles the row's dot product once.
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
#else
// The batched kernel (a batched decode step's rows, models/decode_batch.hpp): workgroup
// (x, y) takes tokens x * NB, ... (the token groups of one block of rows run one after the
// other, the block still in cache) and the y-th block of rows. Each token's row sums are
// those of the one-token kernel above, bit for bit: the same lane parts (row_parts) meeting
// by the same shuffles.

void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.x * NB;
  [[unroll]] for (uint t = 0u; t < NB; ++t) hold_x(min(t0 + t, TOKENS - 1u) * K, lane, t * X_PER_TOKEN);
  uint first = gl_WorkGroupID.y * LOCAL * R;
  [[dont_unroll]] for (uint g = 0u; g < R; ++g) {
    uint base = first + g * LOCAL;
    float mine[NB_MAX];
    [[unroll]] for (uint t = 0u; t < NB_MAX; ++t) mine[t] = 0.0;
    [[dont_unroll]] for (uint i = 0u; i < LOCAL; ++i) {
      float acc[NB_MAX];
      row_parts(min(base + i, ROWS - 1u) * W_STRIDE, lane, acc);
      [[unroll]] for (uint t = 0u; t < NB; ++t) {
        float s = lanes_sum(acc[t], lane);
        mine[t] = lane == i ? s : mine[t];
      }
    }
    // One store per token from a loop that is not unrolled (the epilogue inlined once).
    [[dont_unroll]] for (uint t = 0u; t < NB; ++t)
      if (t0 + t < TOKENS) put_row(t0 + t, base + lane, mine[t]);
  }
}
#endif
