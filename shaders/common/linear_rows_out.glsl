// What the CPU mat-vecs (common/linear_matvec_rows.glsl, common/linear_matvec_cols.glsl)
// do with their sums: each row's store with its epilogue, offered to the greedy pick with
// PICK_AFTER; after the workgroup's last row, the LayerNorm (LN_AFTER) or the pick
// (PICK_AFTER) that the last workgroup to finish runs.
#ifdef LN_AFTER
#include "common/linear_norm_after.glsl"
#endif
#ifdef PICK_AFTER
#include "common/linear_pick_after.glsl"
#endif

// Rows past the end (the kernels clamp them to read a valid row) are dropped here.
void put_row(uint t, uint row, float sum) {
  if (row < ROWS) {
    float v = store_y(t, row, sum);
#ifdef PICK_AFTER
    pick_offer(row, v);
#endif
  }
}

void after_rows(uint lane) {
#ifdef LN_AFTER
  layernorm_if_last(lane);
#endif
#ifdef PICK_AFTER
  pick_if_last(lane);
#endif
}
