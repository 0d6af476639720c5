// Cooperative-matrix GEMM (shaders/linear_coopmat.comp): a workgroup computes a BM x BN
// tile of y (tokens by outputs) from BK inputs at a time staged in shared memory as f16
// (x converted from f32, W's f16 words copied as they are). Each subgroup owns a
// (TM * CM) x (TN * CN) part of the tile: TM x TN accumulators of the device's CM x CN
// shape, multiplied CK inputs at a time. Workgroup size: (BM / (TM * CM)) * (BN / (TN * CN))
// subgroups. W must be f16 (DT 1); x rows may hold any K (zero padded to BK).
layout(constant_id = 7) const uint BM = 64;
layout(constant_id = 8) const uint BN = 64;
layout(constant_id = 9) const uint BK = 32;
layout(constant_id = 10) const uint TM = 2;
layout(constant_id = 11) const uint TN = 2;
// Split-K as in common/linear_gemm_tiled.glsl: workgroup z sums its share of the inputs into
// token rows z * T + t, for the split_sum pass to add up with the epilogue.
layout(constant_id = 12) const uint SPLIT_K = 1;
layout(constant_id = 13) const uint CM = 16;
layout(constant_id = 14) const uint CN = 16;
layout(constant_id = 15) const uint CK = 16;

const uint K_PER_SPLIT = (K + SPLIT_K * BK - 1) / (SPLIT_K * BK) * BK;
// Staged rows are padded by 8 halves (16 bytes): the matrix loads' rows then start on
// different shared-memory banks, and every row start stays 16-byte aligned.
const uint LDS = BK + 8u;
const uint WM = BM / (TM * CM);  // subgroups along tokens
const uint WN = BN / (TN * CN);  // subgroups along outputs

shared float16_t x_tile[BM * LDS];  // [token][k]
shared float16_t w_tile[BN * LDS];  // [output][k]
shared float out_tile[WM * WN * CM * CN];  // each subgroup's accumulator, one at a time

#if defined(COOPMAT_KHR)
#extension GL_KHR_cooperative_matrix : require
#define ACC_T coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>
#define A_T coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define B_T coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>
#define LOAD_ROWS(m, a, e, s) coopMatLoad(m, a, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_COLS(m, a, e, s) coopMatLoad(m, a, e, s, gl_CooperativeMatrixLayoutColumnMajor)
#define STORE_ROWS(m, a, e, s) coopMatStore(m, a, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define MUL_ADD(a, b, c) coopMatMulAdd(a, b, c)
#else
#extension GL_NV_cooperative_matrix : require
#define ACC_T fcoopmatNV<32, gl_ScopeSubgroup, CM, CN>
#define A_T fcoopmatNV<16, gl_ScopeSubgroup, CM, CK>
#define B_T fcoopmatNV<16, gl_ScopeSubgroup, CK, CN>
#define LOAD_ROWS(m, a, e, s) coopMatLoadNV(m, a, e, s, false)
#define LOAD_COLS(m, a, e, s) coopMatLoadNV(m, a, e, s, true)
#define STORE_ROWS(m, a, e, s) coopMatStoreNV(m, a, e, s, false)
#define MUL_ADD(a, b, c) coopMatMulAddNV(a, b, c)
#endif

// Stages x[tile_t.., k0..k0+BK) and W[tile_o.., k0..k0+BK) as f16; zeros past T, K and N.
void stage(uint tid, uint tile_t, uint tile_o, uint k0) {
  const uint LOCAL = gl_WorkGroupSize.x;
  const uint XQ = BK / 4u;  // vec4 groups of inputs per staged token
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
    for (uint c = 0u; c < 4u; ++c) x_tile[m * LDS + kk + c] = float16_t(v[c]);
  }
  const uint WQ = BK / 8u;  // W words (8 halves) per staged output
  for (uint e = tid; e < BN * WQ; e += LOCAL) {
    uint n = e / WQ, qw = e % WQ;
    uint o = tile_o + n, q = k0 / 8u + qw;
    // Inputs past K within the last word are the row's zero padding; words past it are 0.
    uvec4 p = (o < ROWS && q < K_WORDS) ? w[o * W_STRIDE + q] : uvec4(0u);
    uint base = n * LDS + qw * 8u;
    for (uint c = 0u; c < 4u; ++c) {
      f16vec2 h = unpackFloat2x16(p[c]);
      w_tile[base + 2u * c] = h.x;
      w_tile[base + 2u * c + 1u] = h.y;
    }
  }
}

void main() {
  read_push_constants();
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint sg_m = sg / WN, sg_n = sg % WN;  // this subgroup's place in the tile
  const uint tile_t = gl_WorkGroupID.x * BM, tile_o = gl_WorkGroupID.y * BN;

  ACC_T acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = ACC_T(0.0);

  const uint k_begin = gl_WorkGroupID.z * K_PER_SPLIT, k_end = min(K, k_begin + K_PER_SPLIT);
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    stage(tid, tile_t, tile_o, k0);
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
      A_T a[TM];
      B_T b[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) LOAD_ROWS(a[i], x_tile, ((sg_m * TM + i) * CM) * LDS + kk, LDS);
      // B[k][n] = W[n][k]: W's staged rows are B's columns.
      [[unroll]] for (uint j = 0u; j < TN; ++j) LOAD_COLS(b[j], w_tile, ((sg_n * TN + j) * CN) * LDS + kk, LDS);
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = MUL_ADD(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  // Through shared memory, one accumulator at a time, into the epilogue.
  const uint scratch = sg * CM * CN;
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      STORE_ROWS(acc[i][j], out_tile, scratch, CN);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < CM * CN; e += gl_SubgroupSize) {
        uint t = tile_t + (sg_m * TM + i) * CM + e / CN, o = tile_o + (sg_n * TN + j) * CN + e % CN;
        if (t < TOKENS && o < ROWS) store_y(gl_WorkGroupID.z * TOKENS + t, o, out_tile[scratch + e]);
      }
      subgroupBarrier();
    }
}
