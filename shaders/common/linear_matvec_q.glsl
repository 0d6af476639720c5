// Mat-vec over Q8_0 / Q4_0 rows (decode on GPUs, and the fallback on CPU devices): as
// common/linear_matvec.glsl, a workgroup computes R consecutive outputs of token
// gl_WorkGroupID.y, its invocations splitting the inputs, here by blocks of 32 (adjacent
// invocations read adjacent blocks). Each block's dot product is taken unscaled and then
// multiplied by its scale once, f32 throughout.
layout(constant_id = 7) const uint R = 4;  // outputs per workgroup

const uint NSUM = R;
#include "common/linear_matvec_sums.glsl"

void main() {
  read_push_constants();
  const uint LOCAL = gl_WorkGroupSize.x;
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  uint row0 = gl_WorkGroupID.x * R;
  uint xrow = t * K;

  uint wrow[R];
  float acc[R];
  for (uint i = 0u; i < R; ++i) wrow[i] = min(row0 + i, ROWS - 1u) * W_STRIDE;  // clamped, result dropped
  for (uint i = 0u; i < R; ++i) acc[i] = 0.0;

  for (uint b = lane; b < QB; b += LOCAL) {
    vec4 x[8];
    q_load_x(xrow, b, x);
    for (uint i = 0u; i < R; ++i) {
      uvec4 p[2];
      q_block(wrow[i], b, p);
      acc[i] = fma(q_scale(load_w(wrow[i] + b / 8u), b), q_block_dot(p, x), acc[i]);
    }
  }

  reduce_sums(acc, lane);
  for (uint i = lane; i < R; i += LOCAL)
    if (row0 + i < ROWS) store_y(t, row0 + i, total(i));
}
