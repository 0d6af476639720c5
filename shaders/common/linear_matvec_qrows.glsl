// Mat-vec over Q8_0 / Q4_0 rows for CPU devices (lavapipe), W and x through texel views:
// the row kernel of common/linear_matvec_rows.glsl by blocks. Lane `lane` owns R
// consecutive rows and reads each from start to end (one contiguous stream per lane, which
// the CPU's prefetchers follow), so no reduction across lanes is needed. Per group of 8
// blocks it fetches the row's scale word once; per block its data words. The block's 32
// inputs are the same for every lane: fetched LOCAL texels at a time (one vectorised
// fetch, each lane its own texel) and handed out by subgroupShuffle with a constant index.
layout(constant_id = 7) const uint R = 8;  // rows per invocation (the host sets it)

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

#include "common/linear_rows_out.glsl"

#include "common/linear_rows_held_x.glsl"

#ifdef X_HELD
float row_dot(uint wrow, uint xrow, uint lane) {
  float acc = 0.0;
  [[unroll]] for (uint g = 0u; g < QSW; ++g) {
    uvec4 sw = load_w(wrow + g);
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      uint b = g * 8u + j;
      if (b < QB) {
        uvec4 p[2];
        q_block(wrow, b, p);
        float s = 0.0;
        [[unroll]] for (uint h = 0u; h < 8u; ++h) s = fma4(q_quad(p, h), xh[b * 8u + h], s);
        acc = fma(q_scale(sw, j), s, acc);
      }
    }
  }
  return acc;
}
#else
const uint X_TEXELS = K / 4u;
const uint XF = (8u + LOCAL - 1u) / LOCAL;  // fetches per block's 8 texels of x

float row_dot(uint wrow, uint xrow, uint lane) {
  float acc = 0.0;
  for (uint g = 0u; g < QSW; ++g) {
    uvec4 sw = load_w(wrow + g);
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      uint b = g * 8u + j;
      if (b >= QB) break;  // the same for every lane
      vec4 xl[XF];
      [[unroll]] for (uint f = 0u; f < XF; ++f) xl[f] = load_x4(xrow + min(b * 8u + f * LOCAL + lane, X_TEXELS - 1u) * 4u);
      uvec4 p[2];
      q_block(wrow, b, p);
      float s = 0.0;
      [[unroll]] for (uint h = 0u; h < 8u; ++h) s = fma4(q_quad(p, h), subgroupShuffle(xl[h / LOCAL], h % LOCAL), s);
      acc = fma(q_scale(sw, j), s, acc);
    }
  }
  return acc;
}
#endif

#include "common/linear_rows_main.glsl"
