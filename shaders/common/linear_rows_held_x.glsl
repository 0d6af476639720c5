// x for the row mat-vecs (common/linear_matvec_rows.glsl and, over Q8_0 / Q4_0 blocks,
// common/linear_matvec_qrows.glsl), whose main() is common/linear_rows_main.glsl: with
// X_HELD, hold_x fetches x's token row once per workgroup into xh, which the kernel's
// row_dot reads by constant indices.
#ifdef X_HELD
// x held (K <= X_HELD_MAX, whole words): the workgroup fetches x once, not once per row.
// The loops below are [[unroll]] with trip counts fixed at specialization, which lavapipe
// unrolls in NIR, so every index into the private array xh is a constant and LLVM keeps
// its elements in registers and stack slots (an index it cannot fold would move the array
// to per-lane scratch memory, every access a loop over the lanes). Holding x once per
// workgroup instead of refetching it per row is faster on lavapipe (bench/PERFORMANCE.md,
// "Decode: the mat-vecs"). The cap: holding x for K = 3072 (GPT-2's MLP projection) spills
// the larger stack out of L1 for no gain.
const uint X_HELD_MAX = 1024u;  // largest K (engine/ops/linear.hpp, kMaxHeldInputs)
const uint X_TEXELS = K / 4u;
vec4 xh[X_HELD_MAX / 4u];

const uint X_BLOCKS = (X_TEXELS + LOCAL - 1u) / LOCAL;

void hold_x(uint xrow, uint lane) {
  [[unroll]] for (uint b = 0u; b < X_BLOCKS; ++b) {
    vec4 xl = load_x4(xrow + min(b * LOCAL + lane, X_TEXELS - 1u) * 4u);
    [[unroll]] for (uint c = 0u; c < LOCAL; ++c)
      if (b * LOCAL + c < X_TEXELS) xh[b * LOCAL + c] = subgroupShuffle(xl, c);
  }
}

#endif
