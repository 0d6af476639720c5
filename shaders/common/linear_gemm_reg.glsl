// Register-blocked GEMM without shared memory (for CPU devices such as lavapipe, where
// a workgroup is one SIMD vector on one thread and shared memory and barriers only cost):
// each invocation computes a TM x TN block of y, TM tokens by TN outputs, reading x and W
// straight from the buffers (they stay in the CPU caches). Lanes are arranged LM along
// tokens by LOCAL / LM along outputs; workgroups walk tokens fastest (gl_WorkGroupID.x)
// so consecutive workgroups reuse the same rows of W while they are in cache.
// The weights come from the including shader as for common/linear_gemm_bcast.glsl: each
// part of a row loaded once (w_load), each of its quads (w_quad) serving all TM tokens.
layout(constant_id = 7) const uint TM = 8;  // tokens per invocation
layout(constant_id = 8) const uint TN = 8;  // outputs per invocation
layout(constant_id = 9) const uint LM = 1;  // invocations along tokens

#include "common/linear_gemm_tile.glsl"

void main() {
  read_push_constants();
  const uint LN = gl_WorkGroupSize.x / LM;
  uint lane = gl_LocalInvocationID.x;
  uint t0 = gl_WorkGroupID.x * (LM * TM) + (lane % LM) * TM;
  uint o0 = gl_WorkGroupID.y * (LN * TN) + (lane / LM) * TN;

  uint xr[TM];
  uint wr[TN];
  for (uint i = 0u; i < TM; ++i) xr[i] = min(t0 + i, TOKENS - 1u) * K;
  float acc[TM][TN];
  start_tile(o0, wr, acc);

  for (uint b = 0u; b < W_BLOCKS; ++b) {
    WPart wp[TN];
    [[unroll]] for (uint part = 0u; part < W_PARTS; ++part) {
      for (uint j = 0u; j < TN; ++j) w_load(wp[j], wr[j], b, part);
      [[unroll]] for (uint h = 0u; h < W_QUADS; ++h) {
        uint e = ((b * W_PARTS + part) * W_QUADS + h) * 4u;
        vec4 xq[TM];
        for (uint i = 0u; i < TM; ++i) xq[i] = load_x4_in_row(xr[i], e);
        for (uint j = 0u; j < TN; ++j) {
          vec4 wq = w_quad(wp[j], part, h);
          for (uint i = 0u; i < TM; ++i) acc[i][j] = fma4(wq, xq[i], acc[i][j]);
        }
      }
    }
  }
  store_tile(t0, o0, acc);
}
