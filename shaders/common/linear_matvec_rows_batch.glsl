// The row mat-vec (common/linear_matvec_rows.glsl) over NB tokens at once, for a batched
// decode step (one token of each of several sequences, models/decode_batch.hpp): each lane
// owns R consecutive rows as there, and each weight word it fetches and decodes serves the
// NB tokens of its workgroup, where the one-token kernel reads every weight once per token.
// Each token's sum runs over the row's words in the same order, with the same fma chain
// (word_dot), as the row kernel's, held x or not: a token's outputs are bit for bit those
// of a one-token step. The inputs come as there: LOCAL texels of a token fetched at once
// (one vectorised fetch, each lane its own texel) and handed to all lanes by
// subgroupShuffle with a constant index.
layout(constant_id = 7) const uint R = 8;    // rows per invocation
layout(constant_id = 8) const uint NB = 4;   // tokens per workgroup (at most NB_MAX)
const uint NB_MAX = 16u;

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

#include "common/linear_rows_out.glsl"

const uint TPW = KW / 4u;       // x texels per word of W
const uint WPB = LOCAL / TPW;   // words of W per block of LOCAL x texels
const uint BLOCKS = K_FULL / WPB;

// acc[t] + x_t . W's row (starting at word wrow) for the workgroup's tokens t0 + t.
void rows_dot(uint wrow, uint t0, uint lane, inout float acc[NB_MAX]) {
  for (uint b = 0u; b < BLOCKS; ++b) {
    vec4 xl[NB_MAX];
    [[unroll]] for (uint t = 0u; t < NB; ++t) xl[t] = load_x4(min(t0 + t, TOKENS - 1u) * K + (b * LOCAL + lane) * 4u);
    [[unroll]] for (uint j = 0u; j < WPB; ++j) {
      vec4 lo, hi;
      decode(load_w(wrow + b * WPB + j), lo, hi);
      [[unroll]] for (uint t = 0u; t < NB; ++t) {
        acc[t] = fma4(lo, subgroupShuffle(xl[t], j * TPW), acc[t]);
        if (KW == 8u) acc[t] = fma4(hi, subgroupShuffle(xl[t], j * TPW + 1u), acc[t]);
      }
    }
  }
  // Whole words past the last block, then the partial last word (inputs < K only).
  for (uint q = BLOCKS * WPB; q < K_WORDS; ++q) {
    vec4 lo, hi;
    decode(load_w(wrow + q), lo, hi);
    [[unroll]] for (uint t = 0u; t < NB; ++t) {
      vec4 x_lo, x_hi;
      load_x_word(min(t0 + t, TOKENS - 1u) * K, q, x_lo, x_hi);
      acc[t] = fma4(lo, x_lo, acc[t]);
      if (KW == 8u) acc[t] = fma4(hi, x_hi, acc[t]);
    }
  }
}

void main() {
  read_push_constants();
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.y * NB;
  uint first = (gl_WorkGroupID.x * LOCAL + lane) * R;
  [[dont_unroll]] for (uint i = 0u; i < R; ++i) {
    uint row = first + i;
    float acc[NB_MAX];
    [[unroll]] for (uint t = 0u; t < NB_MAX; ++t) acc[t] = 0.0;
    // Rows past the end are clamped (read a valid row, result dropped).
    rows_dot(min(row, ROWS - 1u) * W_STRIDE, t0, lane, acc);
    // One store per token from a loop that is not unrolled (the epilogue inlined once).
    [[dont_unroll]] for (uint t = 0u; t < NB; ++t)
      if (t0 + t < TOKENS) put_row(t0 + t, row, acc[t]);
  }
}
