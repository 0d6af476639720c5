// The batched column-split mat-vecs' constants (common/linear_matvec_cols.glsl,
// common/linear_matvec_qcols.glsl, COLS_BATCH; main() in common/linear_cols_main.glsl): NB
// tokens a workgroup, whose inputs each lane holds together, at most XB_MAX texels.
layout(constant_id = 8) const uint NB = 4;  // tokens per workgroup
const uint NB_MAX = 16u;                    // engine/ops/linear.hpp, kColsBatchTokens
const uint XB_MAX = 512u;                   // engine/ops/linear.hpp, kColsBatchTexels
