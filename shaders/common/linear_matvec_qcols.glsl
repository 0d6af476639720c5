// Mat-vec over Q8_0 / Q4_0 rows for CPU devices (lavapipe), W and x through texel views:
// the column split of common/linear_matvec_cols.glsl by blocks. A workgroup is one
// subgroup; lane `lane` takes blocks lane, lane + LOCAL, ... of every row, holding the
// inputs of those blocks for the whole dispatch, so each texel fetch of the workgroup
// reads LOCAL adjacent blocks and the workgroup streams its rows front to back. A row's
// LOCAL partial sums meet by shuffles; lane i keeps the i-th row of each group of LOCAL.
layout(constant_id = 7) const uint R = 8;  // groups of LOCAL rows per workgroup
#ifdef COLS_BATCH
#include "common/linear_cols_batch.glsl"
#endif

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

#include "common/linear_rows_out.glsl"

// Blocks of a row per lane; lanes past the row's last block read that block again
// against inputs of 0.
const uint BPL = (QB + LOCAL - 1u) / LOCAL;
// Held inputs per lane; the batched kernel's token t's from xc[t * X_PER_TOKEN].
const uint X_PER_TOKEN = BPL * 8u;
#include "common/linear_cols_held_x.glsl"

void hold_x(uint xrow, uint lane, uint at) {
  [[unroll]] for (uint q = 0u; q < BPL; ++q) {
    uint b = q * LOCAL + lane;
    vec4 x[8];
    q_load_x(xrow, min(b, QB - 1u), x);
    [[unroll]] for (uint h = 0u; h < 8u; ++h) xc[at + q * 8u + h] = b < QB ? x[h] : vec4(0.0);
  }
}

float row_part(uint wrow, uint lane) {
  float acc = 0.0;
  [[unroll]] for (uint q = 0u; q < BPL; ++q) {
    uint b = min(q * LOCAL + lane, QB - 1u);
    uvec4 p[2];
    q_block(wrow, b, p);
    float s = 0.0;
    [[unroll]] for (uint h = 0u; h < 8u; ++h) s = fma4(q_quad(p, h), xc[q * 8u + h], s);
    acc = fma(q_scale(load_w(wrow + b / 8u), b), s, acc);
  }
  return acc;
}

#ifdef COLS_BATCH
// row_part for each of the NB held tokens: every block fetched and decoded once for them,
// each token's sum in row_part's order, bit for bit what row_part gives for it alone.
void row_parts(uint wrow, uint lane, out float acc[NB_MAX]) {
  [[unroll]] for (uint t = 0u; t < NB_MAX; ++t) acc[t] = 0.0;
  [[unroll]] for (uint q = 0u; q < BPL; ++q) {
    uint b = min(q * LOCAL + lane, QB - 1u);
    uvec4 p[2];
    q_block(wrow, b, p);
    float d = q_scale(load_w(wrow + b / 8u), b);
    float s[NB_MAX];
    [[unroll]] for (uint t = 0u; t < NB; ++t) s[t] = 0.0;
    [[unroll]] for (uint h = 0u; h < 8u; ++h) {
      vec4 w = q_quad(p, h);
      [[unroll]] for (uint t = 0u; t < NB; ++t) s[t] = fma4(w, xc[t * X_PER_TOKEN + q * 8u + h], s[t]);
    }
    [[unroll]] for (uint t = 0u; t < NB; ++t) acc[t] = fma(d, s[t], acc[t]);
  }
}
#endif

#include "common/linear_cols_main.glsl"
