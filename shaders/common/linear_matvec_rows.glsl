// Mat-vec for CPU devices (lavapipe), W and x both read through texel views. Invocation
// `lane` owns the R consecutive rows first + i (i < R) and takes them one after the other,
// each from start to end, so a workgroup of one SIMD vector streams R * LOCAL rows and needs
// no reduction across invocations. One row at a time makes each invocation's reads one
// contiguous run of R rows, which the CPU's prefetchers follow; walking its R rows side by
// side (R * LOCAL interleaved streams, each one row long) left the prefetchers behind and
// read markedly less per second (bench/PERFORMANCE.md, "What limits it").
// Every invocation needs the same inputs: they are fetched LOCAL texels at a time (one
// vectorised fetch, each invocation its own texel) and handed to all by subgroupShuffle
// with a constant index (one permute on lavapipe), where a fetch of the same address by
// every invocation would cost a whole gather per word. They are fetched again for each row
// (from L1: x is a few KiB). Lanes splitting each row's columns instead (each keeping its
// own inputs, no shuffles: a quarter fewer instructions) ran as fast on cached weights and
// at half the speed from memory: one stream per thread starves the prefetchers.
layout(constant_id = 7) const uint R = 8;  // rows per invocation (the host sets it)

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

#include "common/linear_rows_out.glsl"

#include "common/linear_rows_held_x.glsl"

#ifdef X_HELD
float row_dot(uint wrow, uint xrow, uint lane) {
  float acc = 0.0;
  [[unroll]] for (uint q = 0u; q < K_FULL; ++q)
    acc = word_dot(load_w(wrow + q), KW == 8u ? xh[2u * q] : xh[q], KW == 8u ? xh[2u * q + 1u] : vec4(0.0), acc);
  return acc;
}
#else
// Dot product of x's token row (element offset xrow) with the W row starting at word wrow.
float row_dot(uint wrow, uint xrow, uint lane) {
  const uint TPW = KW / 4u;          // x texels per word of W
  const uint WPB = LOCAL / TPW;      // words of W per block of LOCAL x texels
  const uint BLOCKS = K_FULL / WPB;
  float acc = 0.0;
  for (uint b = 0u; b < BLOCKS; ++b) {
    vec4 xl = load_x4(xrow + (b * LOCAL + lane) * 4u);
    for (uint j = 0u; j < WPB; ++j) {
      vec4 x_lo = subgroupShuffle(xl, j * TPW);
      vec4 x_hi = KW == 8u ? subgroupShuffle(xl, j * TPW + 1u) : vec4(0.0);
      acc = word_dot(load_w(wrow + b * WPB + j), x_lo, x_hi, acc);
    }
  }
  // Whole words past the last block, then the partial last word (inputs < K only).
  for (uint q = BLOCKS * WPB; q < K_FULL; ++q) {
    vec4 x_lo = load_x4(xrow + q * KW);
    vec4 x_hi = KW == 8u ? load_x4(xrow + q * KW + 4u) : vec4(0.0);
    acc = word_dot(load_w(wrow + q), x_lo, x_hi, acc);
  }
  if (K_TAIL > 0u) {
    vec4 x_lo, x_hi;
    load_x_word(xrow, K_FULL, x_lo, x_hi);
    acc = word_dot(load_w(wrow + K_FULL), x_lo, x_hi, acc);
  }
  return acc;
}
#endif

#include "common/linear_rows_main.glsl"
