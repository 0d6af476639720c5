// Mat-vec over Q8_0 / Q4_0 rows (decode on GPUs, and the fallback on CPU devices): as
// common/linear_matvec.glsl, a workgroup computes R consecutive outputs of TB tokens, its
// invocations splitting the inputs, here by blocks of 32 (adjacent invocations read
// adjacent blocks). Each block's dot product is taken unscaled and then multiplied by its
// scale once, f32 throughout.
layout(constant_id = 7) const uint R = 4;   // outputs per workgroup
layout(constant_id = 8) const uint TB = 1;  // tokens per workgroup

const uint NSUM = R;
#include "common/linear_matvec_sums.glsl"

// The invocation's blocks of every row, LOCAL apart, for each token of the workgroup (a
// block's words read again for each token, from cache after the first).
void lane_sums(uint xrows[TB], uint wrow[R], uint lane, inout float acc[TB][NSUM]) {
  for (uint b = lane; b < QB; b += LOCAL) {
    for (uint j = 0u; j < TB; ++j) {
      vec4 x[8];
      q_load_x(xrows[j], b, x);
      for (uint i = 0u; i < R; ++i) {
        uvec4 p[2];
        q_block(wrow[i], b, p);
        acc[j][i] = fma(q_scale(load_w(wrow[i] + b / 8u), b), q_block_dot(p, x), acc[j][i]);
      }
    }
  }
}

void put_sum(uint t, uint row, uint i) { store_y(t, row, total(i)); }

#include "common/linear_matvec_main.glsl"
