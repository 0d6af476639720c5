// Shared-memory tiled GEMM (for GPUs): a workgroup computes a BM x BN tile of y (tokens
// by outputs), staging BK inputs of x and W at a time in shared memory; each invocation
// accumulates TM x TN outputs in registers, spaced BM/TM and BN/TN apart so that reads of
// the staged tiles are broadcasts or consecutive (no bank conflicts).
// Workgroup size is (BM / TM) * (BN / TN); BK is a multiple of 8 (whole W words).
// Over Q8_0 / Q4_0 rows (shaders/linear_q.comp, LINEAR_QUANT_W) W's tile is dequantized as
// it is staged, 4 weights (one 32-bit word of a block, or of a Q4_0 block's nibbles) per
// store, each times its block's scale; the rest is the same kernel.
layout(constant_id = 7) const uint BM = 64;
layout(constant_id = 8) const uint BN = 64;
layout(constant_id = 9) const uint BK = 16;
layout(constant_id = 10) const uint TM = 4;
layout(constant_id = 11) const uint TN = 4;
// Split-K: workgroup z sums only its share of the inputs (a multiple of BK) and stores the
// partial sums as token rows z * T + t, for a split_sum dispatch to add up (the host then
// gives this pass no bias, activation or residual). A product of few tiles gets that many
// more workgroups, each with as short a K loop. Without it, GPT-2 XL's 128-token prompt on
// an H100 runs proj (6400 inputs, 1600 outputs) as 50 tiles: one workgroup on each of 50 of
// the 132 multiprocessors, 400 steps of BK each (bench/PERFORMANCE.md, "GPUs").
layout(constant_id = 12) const uint SPLIT_K = 1;
const uint K_PER_SPLIT = (K + SPLIT_K * BK - 1) / (SPLIT_K * BK) * BK;

shared float x_tile[BK * BM];  // [k][token]
shared float w_tile[BK * BN];  // [k][output]

void main() {
  read_push_constants();
  const uint LOCAL = gl_WorkGroupSize.x;
  const uint NX = BN / TN;  // invocations along outputs
  const uint NY = BM / TM;  // invocations along tokens
  const uint XQ = BK / 4u;  // vec4 groups of inputs per staged token
#ifndef LINEAR_QUANT_W
  const uint WQ = BK / KW;  // W words per staged output
#endif
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
      vec4 v = vec4(0.0);
      if (t < TOKENS) {
        if (k + 4u <= K) {
          v = load_x4(t * K + k);
        } else {
          for (uint c = 0u; c < 4u; ++c)
            if (k + c < K) v[c] = load_x1(t * K + k + c);
        }
      }
      for (uint c = 0u; c < 4u; ++c) x_tile[(kk + c) * BM + m] = v[c];
    }
#ifdef LINEAR_QUANT_W
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
#else
    for (uint e = tid; e < BN * WQ; e += LOCAL) {
      uint n = e / WQ, qw = e % WQ;
      uint o = tile_o + n, q = k0 / KW + qw;
      vec4 lo = vec4(0.0), hi = vec4(0.0);
      // Inputs past K within the last word are the row's zero padding; words past it are 0.
      if (o < ROWS && q < K_WORDS) decode(w[o * W_STRIDE + q], lo, hi);
      uint kk = qw * KW;
      for (uint c = 0u; c < 4u; ++c) w_tile[(kk + c) * BN + n] = lo[c];
      if (KW == 8u)
        for (uint c = 0u; c < 4u; ++c) w_tile[(kk + 4u + c) * BN + n] = hi[c];
    }
#endif
    barrier();
    for (uint kk = 0u; kk < BK; ++kk) {
      float a[TM], b[TN];
      for (uint i = 0u; i < TM; ++i) a[i] = x_tile[kk * BM + ty + i * NY];
      for (uint j = 0u; j < TN; ++j) b[j] = w_tile[kk * BN + tx + j * NX];
      for (uint i = 0u; i < TM; ++i)
        for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) {
      uint t = tile_t + ty + i * NY, o = tile_o + tx + j * NX;
      if (t < TOKENS && o < ROWS) store_y(gl_WorkGroupID.z * TOKENS + t, o, acc[i][j]);
    }
}
