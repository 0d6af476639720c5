// Shared-memory tiled GEMM over Q8_0 / Q4_0 rows (GPUs): common/linear_gemm_tiled.glsl
// with W's tile dequantized as it is staged, 4 weights (one 32-bit word of a block, or of
// a Q4_0 block's nibbles) per store, each times its block's scale. Split-K as there (the
// host's add_split_k runs it with split_sum). BK is a multiple of 4.
layout(constant_id = 7) const uint BM = 64;
layout(constant_id = 8) const uint BN = 64;
layout(constant_id = 9) const uint BK = 16;
layout(constant_id = 10) const uint TM = 4;
layout(constant_id = 11) const uint TN = 4;
layout(constant_id = 12) const uint SPLIT_K = 1;
const uint K_PER_SPLIT = (K + SPLIT_K * BK - 1) / (SPLIT_K * BK) * BK;

shared float x_tile[BK * BM];  // [k][token]
shared float w_tile[BK * BN];  // [k][output]

void main() {
  read_push_constants();
  const uint LOCAL = gl_WorkGroupSize.x;
  const uint NX = BN / TN;
  const uint NY = BM / TM;
  const uint XQ = BK / 4u;  // groups of 4 inputs per staged token (and weights per staged output)
  uint tid = gl_LocalInvocationID.x;
  uint tx = tid % NX, ty = tid / NX;
  uint tile_t = gl_WorkGroupID.x * BM, tile_o = gl_WorkGroupID.y * BN;

  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  const uint k_begin = gl_WorkGroupID.z * K_PER_SPLIT, k_end = min(K, k_begin + K_PER_SPLIT);
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    for (uint e = tid; e < BM * XQ; e += LOCAL) {
      uint m = e / XQ, kk = (e % XQ) * 4u;
      uint t = tile_t + m, k = k0 + kk;
      vec4 v = (t < TOKENS && k < K) ? load_x4(t * K + k) : vec4(0.0);  // K is a multiple of 32
      for (uint c = 0u; c < 4u; ++c) x_tile[(kk + c) * BM + m] = v[c];
    }
    for (uint e = tid; e < BN * XQ; e += LOCAL) {
      uint n = e / XQ, kk = (e % XQ) * 4u;
      uint o = tile_o + n, k = k0 + kk;
      vec4 v = vec4(0.0);
      if (o < ROWS && k < K) {
        uint wrow = o * W_STRIDE, b = k / 32u, h = (k % 32u) / 4u;
        uvec4 p[2];
        q_block(wrow, b, p);
        v = q_quad(p, h) * q_scale(load_w(wrow + b / 8u), b);
      }
      for (uint c = 0u; c < 4u; ++c) w_tile[(kk + c) * BN + n] = v[c];
    }
    barrier();
    for (uint kk = 0u; kk < BK; ++kk) {
      float a[TM], bw[TN];
      for (uint i = 0u; i < TM; ++i) a[i] = x_tile[kk * BM + ty + i * NY];
      for (uint j = 0u; j < TN; ++j) bw[j] = w_tile[kk * BN + tx + j * NX];
      for (uint i = 0u; i < TM; ++i)
        for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(a[i], bw[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) {
      uint t = tile_t + ty + i * NY, o = tile_o + tx + j * NX;
      if (t < TOKENS && o < ROWS) store_y(gl_WorkGroupID.z * TOKENS + t, o, acc[i][j]);
    }
}
