// The inputs a column-split kernel's lane holds (common/linear_matvec_cols.glsl and
// linear_matvec_qcols.glsl): at most XC_MAX texels (engine/ops/linear.hpp,
// kMaxColumnSplitTexels), or, batched, NB tokens' at most XB_MAX (common/linear_cols_batch.glsl).
const uint XC_MAX = 256u;
#ifdef COLS_BATCH
vec4 xc[XB_MAX];
#else
vec4 xc[XC_MAX];
#endif
