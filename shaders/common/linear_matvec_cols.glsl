// Mat-vec for CPU devices (lavapipe) whose lanes split each row's columns: lane `lane` reads
// words lane, lane + LOCAL, lane + 2 LOCAL, ... of every row, so each texel fetch of the
// workgroup is LOCAL adjacent 16-byte texels, and the workgroup reads its block of rows
// front to back as one run. Each lane holds the inputs of its own words for the whole
// dispatch (no broadcasts); a row's LOCAL partial sums meet by shuffles at the row's end,
// and lane i keeps the sum of the i-th row of each group of LOCAL rows, so that every lane
// stores one output per group.
// Against the row kernel (common/linear_matvec_rows.glsl: a lane per row, LOCAL streams per
// workgroup, inputs broadcast), one stream per workgroup decodes faster on AMD EPYC (Zen 5)
// VMs in every dtype; on Intel Xeon VMs a column split ran at half the row kernel's speed
// from memory (bench/PERFORMANCE.md, "Decode: the mat-vecs"), so the engine picks it by host
// CPU (Caps::column_split_matvec, engine/vk/context.hpp).
layout(constant_id = 7) const uint R = 8;  // groups of LOCAL rows per workgroup
#ifdef COLS_BATCH
#include "common/linear_cols_batch.glsl"
#endif

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

#include "common/linear_rows_out.glsl"

// Words of a row per lane; the lanes' last words may lie past the row's end (K_WORDS not a
// multiple of LOCAL): those read the row's last word again, against inputs of 0.
const uint WPL = (K_WORDS + LOCAL - 1u) / LOCAL;
const uint TPW = KW / 4u;  // x texels per word
const uint X_PER_TOKEN = WPL * TPW;  // held texels of one token's inputs
// Held inputs per lane; the batched kernel's token t's from xc[t * X_PER_TOKEN]. The loops
// below are [[unroll]] with trip counts fixed at specialization, so every index into xc is a
// constant and the array lives in registers and stack slots (see
// common/linear_matvec_rows.glsl).
#include "common/linear_cols_held_x.glsl"

void hold_x(uint xrow, uint lane, uint at) {
  [[unroll]] for (uint q = 0u; q < WPL; ++q) {
    uint word = q * LOCAL + lane;
    vec4 lo = vec4(0.0), hi = vec4(0.0);
    if (word < K_WORDS) load_x_word(xrow, word, lo, hi);
    xc[at + q * TPW] = lo;
    if (TPW == 2u) xc[at + q * TPW + 1u] = hi;
  }
}

float row_part(uint wrow, uint lane) {
  float acc = 0.0;
  [[unroll]] for (uint q = 0u; q < WPL; ++q)
    acc = word_dot(load_w(wrow + min(q * LOCAL + lane, K_WORDS - 1u)), xc[q * TPW],
                   TPW == 2u ? xc[q * TPW + 1u] : vec4(0.0), acc);
  return acc;
}

#ifdef COLS_BATCH
// row_part for each of the NB held tokens: every word fetched and decoded once for them,
// each token's sum over the words in row_part's order with the same fma chain (word_dot),
// so each is bit for bit what row_part gives for that token alone.
void row_parts(uint wrow, uint lane, out float acc[NB_MAX]) {
  [[unroll]] for (uint t = 0u; t < NB_MAX; ++t) acc[t] = 0.0;
  [[unroll]] for (uint q = 0u; q < WPL; ++q) {
    vec4 lo, hi;
    decode(load_w(wrow + min(q * LOCAL + lane, K_WORDS - 1u)), lo, hi);
    [[unroll]] for (uint t = 0u; t < NB; ++t) {
      acc[t] = fma4(lo, xc[t * X_PER_TOKEN + q * TPW], acc[t]);
      if (KW == 8u) acc[t] = fma4(hi, xc[t * X_PER_TOKEN + q * TPW + 1u], acc[t]);
    }
  }
}
#endif

#include "common/linear_cols_main.glsl"
