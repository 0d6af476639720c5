// Cooperative-matrix GEMM (shaders/linear_coopmat.comp): a workgroup computes a BM x BN
// tile of y (tokens by outputs) from BK inputs at a time staged in shared memory as f16
// (x converted from f32; W's f16 words copied as they are, bf16 ones converted, Q8_0 / Q4_0
// blocks dequantized, each weight times its block's scale); each step's loads from memory
// are issued before the matrix units work on the step staged before it. Each subgroup owns a
// (TM * CM) x (TN * CN) part of the tile: TM x TN accumulators of the device's CM x CN
// shape, multiplied CK inputs at a time. Workgroup size: (BM / (TM * CM)) * (BN / (TN * CN))
// subgroups of SUBGROUP invocations. x rows may hold any K (zero padded to BK; Q8_0 / Q4_0
// rows are whole blocks of 32); BK is a multiple of 8 and of CK. bf16 weights reach f16's
// range only up to 65504: the host takes this kernel only for matrices within it
// (Matrix::outside_f16).
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

layout(constant_id = 16) const uint SUBGROUP = 32;  // invocations per subgroup (the device's)

const uint K_PER_SPLIT = (K + SPLIT_K * BK - 1) / (SPLIT_K * BK) * BK;
const uint WM = BM / (TM * CM);  // subgroups along tokens
const uint WN = BN / (TN * CN);  // subgroups along outputs
const uint LOCAL = WM * WN * SUBGROUP;
// Staged rows are uvec4s of 8 halves: BK inputs and one uvec4 of padding, so that the
// matrix loads' rows start on different shared-memory banks. The matrix loads and stores
// count offsets and strides in the array's elements (uvec4s), as the extensions define.
const uint Q = BK / 8u;        // uvec4s of inputs per staged row
const uint LDS = Q + 1u;       // uvec4s per staged row
const uint X_WORDS = BM * Q;   // uvec4s of x (8 inputs each, as f16) per step
const uint W_WORDS = BN * Q;   // W's words per step
const uint X_PER = (X_WORDS + LOCAL - 1u) / LOCAL;
const uint W_PER = (W_WORDS + LOCAL - 1u) / LOCAL;

shared uvec4 x_tile[BM * LDS];  // [token][k]
shared uvec4 w_tile[BN * LDS];  // [output][k]
shared float out_tile[WM * WN * CM * CN];  // each subgroup's accumulator, one at a time

// The next step's x and W, loaded from memory while the matrix units work on this one.
uvec4 x_next[X_PER], w_next[W_PER];

#include "common/coopmat.glsl"

uint pack_f16(vec2 v) { return packFloat2x16(f16vec2(v)); }
uvec4 pack_f16(vec4 lo, vec4 hi) { return uvec4(pack_f16(lo.xy), pack_f16(lo.zw), pack_f16(hi.xy), pack_f16(hi.zw)); }

// Weights k .. k + 7 of W's row o (k a multiple of 8, below K) as 8 halves.
#ifdef QUANT_W
uvec4 w_halves(uint o, uint k) {
  const uint wrow = o * W_STRIDE, b = k / 32u, h = (k % 32u) / 4u;  // quads h and h + 1 of block b
  // The block's one data word holding both quads (Q8_0: its second word from weight 16).
  const uvec4 word = load_w(wrow + QSW + b * QWB + (Q4 ? 0u : h / 4u));
  const uvec4 p[2] = uvec4[2](word, word);
  const float d = q_scale(load_w(wrow + b / 8u), b);
  return pack_f16(q_quad(p, h) * d, q_quad(p, h + 1u) * d);
}
#else
uvec4 w_halves(uint o, uint k) {
  const uvec4 p = load_w(o * W_STRIDE + k / 8u);
  if (DT != 2u) return p;  // f16 as stored
  vec4 lo, hi;
  decode(p, lo, hi);  // bf16 to f32, exactly
  return pack_f16(lo, hi);
}
#endif

// Loads x[tile_t.., k0..k0+BK) as f16 and W[tile_o.., k0..k0+BK) into registers; zeros past
// T, K and N (inputs past K within W's last word are the row's zero padding).
void fetch(uint tid, uint tile_t, uint tile_o, uint k0) {
  STAGING_LOOP for (uint i = 0u; i < X_PER; ++i) {
    const uint e = tid + i * LOCAL, t = tile_t + e / Q, k = k0 + (e % Q) * 8u;
    vec4 lo = vec4(0.0), hi = vec4(0.0);
    if (e < X_WORDS && t < TOKENS) {
      if (k + 8u <= K) {
        lo = load_x4(t * K + k);
        hi = load_x4(t * K + k + 4u);
      } else {
        for (uint c = 0u; c < 4u; ++c) {
          if (k + c < K) lo[c] = load_x1(t * K + k + c);
          if (k + 4u + c < K) hi[c] = load_x1(t * K + k + 4u + c);
        }
      }
    }
    x_next[i] = pack_f16(lo, hi);
  }
  STAGING_LOOP for (uint i = 0u; i < W_PER; ++i) {
    const uint e = tid + i * LOCAL, o = tile_o + e / Q, k = k0 + (e % Q) * 8u;
    w_next[i] = (e < W_WORDS && o < ROWS && k < K) ? w_halves(o, k) : uvec4(0u);
  }
}

void stage(uint tid) {
  STAGING_LOOP for (uint i = 0u; i < X_PER; ++i) {
    const uint e = tid + i * LOCAL;
    if (e < X_WORDS) x_tile[(e / Q) * LDS + e % Q] = x_next[i];
  }
  STAGING_LOOP for (uint i = 0u; i < W_PER; ++i) {
    const uint e = tid + i * LOCAL;
    if (e < W_WORDS) w_tile[(e / Q) * LDS + e % Q] = w_next[i];
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
    [[unroll]] for (uint j = 0u; j < TN; ++j) ACC_ZERO(acc[i][j]);

  const uint k_begin = gl_WorkGroupID.z * K_PER_SPLIT, k_end = min(K, k_begin + K_PER_SPLIT);
  if (k_begin < k_end) {
    fetch(tid, tile_t, tile_o, k_begin);
    stage(tid);
  }
  barrier();
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    const bool more = k0 + BK < k_end;
    if (more) fetch(tid, tile_t, tile_o, k0 + BK);
    MATRIX_LOOP for (uint kk = 0u; kk < BK; kk += CK) {
      A_T a[TM];
      B_T b[TN];
      MATRIX_LOOP for (uint i = 0u; i < TM; ++i) LOAD_A(a[i], x_tile, (sg_m * TM + i) * CM * LDS + kk / 8u, LDS);
      // B[k][n] = W[n][k]: W's staged rows are B's columns.
      MATRIX_LOOP for (uint j = 0u; j < TN; ++j) LOAD_B_COLS(b[j], w_tile, (sg_n * TN + j) * CN * LDS + kk / 8u, LDS);
      MATRIX_LOOP for (uint i = 0u; i < TM; ++i)
        MATRIX_LOOP for (uint j = 0u; j < TN; ++j) MUL_ADD(acc[i][j], a[i], b[j], x_tile, w_tile);
    }
    barrier();
    if (more) {
      stage(tid);
      barrier();
    }
  }

  // Through shared memory, one accumulator at a time, into the epilogue.
  const uint scratch = sg * CM * CN;
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      STORE_ACC(acc[i][j], out_tile, scratch, CN);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < CM * CN; e += gl_SubgroupSize) {
        uint t = tile_t + (sg_m * TM + i) * CM + e / CN, o = tile_o + (sg_n * TN + j) * CN + e % CN;
        if (t < TOKENS && o < ROWS) store_y(gl_WorkGroupID.z * TOKENS + t, o, out_tile[scratch + e]);
      }
      subgroupBarrier();
    }
}
