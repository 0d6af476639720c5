// main() of the row mat-vecs (common/linear_matvec_rows.glsl, common/linear_matvec_qrows.glsl):
// each lane's R rows one after the other through the kernel's row_dot, x held first where
// X_HELD (common/linear_rows_held_x.glsl).
void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  uint first = (gl_WorkGroupID.x * LOCAL + lane) * R;
#ifdef X_HELD
  hold_x(t * K, lane);
#endif
  // Not unrolled: lavapipe compiles the row loop (and the inlined store) once.
  [[dont_unroll]] for (uint i = 0u; i < R; ++i) {
    uint row = first + i;
    // Rows past the end are clamped (read a valid row, result dropped) so the loop has no branch.
    put_row(t, row, row_dot(min(row, ROWS - 1u) * W_STRIDE, t * K, lane));
  }
  after_rows(lane);
}
