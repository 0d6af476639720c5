#version 450
// Prompt attention on matrix units, flash-attention style (GPUs with cooperative matrices;
// engine/ops/attention_coopmat.cpp): for each head, a workgroup takes WQ * CM queries of
// the step, its subgroups CM each, and walks the keys BC at a time with an online softmax,
// so that each key and value row is read from memory once per workgroup, not once per query
// as the wide kernel does (common/attention_wide.glsl):
//   S = Q K^T (matrix units, f16 in, f32 out) -> scaled, causally masked, online softmax
//   in f32 by the subgroup's invocations, P rounded to f16 -> O = O * alpha + P V (matrix
//   units; O's rows rescaled through shared memory).
// Reads this step's keys and values from the caches: kv_append runs before it. q, k, v
// and p are rounded to f16, as the matrix-unit GEMM rounds x (the plan takes this kernel
// where it takes that GEMM: f16 weights).
// Grid: (ceil(T / (WQ * CM)), n_heads); workgroup: WQ subgroups of SUBGROUP invocations.
//! variant nv requires:coopmat_nv COOPMAT_NV
//! variant nv_kvf16 requires:coopmat_nv COOPMAT_NV KV_F16=1
//! variant khr requires:coopmat_khr COOPMAT_KHR
//! variant khr_kvf16 requires:coopmat_khr COOPMAT_KHR KV_F16=1
//! variant emu COOPMAT_EMU
//! variant emu_kvf16 COOPMAT_EMU KV_F16=1
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if !defined(COOPMAT_EMU)
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 64;          // head dim (a multiple of 8, CN and CK)
layout(constant_id = 2) const uint C = 768;          // n_heads * HD; qkv rows are 3C
layout(constant_id = 3) const uint CONTEXT = 1024;   // positions in each cache
layout(constant_id = 4) const float SCALE = 0.125;   // 1 / sqrt(HD)
layout(constant_id = 5) const uint WQ = 2;           // subgroups per workgroup
layout(constant_id = 6) const uint BC = 32;          // keys per step (a multiple of 8, CN and CK)
layout(constant_id = 7) const uint CM = 16;          // the device's matrix shape
layout(constant_id = 8) const uint CN = 16;
layout(constant_id = 9) const uint CK = 16;
layout(constant_id = 10) const uint SUBGROUP = 32;   // invocations per subgroup (the device's)

#define VT vec4
#include "common/kv_cache.glsl"
#include "common/coopmat.glsl"

layout(std430, binding = 0) readonly buffer Qkv { vec4 qkv[]; };
#define STEP_BINDING 1
#include "common/step.glsl"
layout(std430, binding = 2) readonly buffer KCache { KV_UNIT k_cache[]; };
layout(std430, binding = 3) readonly buffer VCache { KV_UNIT v_cache[]; };
layout(std430, binding = 4) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push { uint T; } pc;

const uint LOCAL = WQ * SUBGROUP;
const uint BR = WQ * CM;        // queries per workgroup
const uint HQ = HD / 8u;        // uvec4s (8 halves) per head row
const uint LDH = HQ + 1u;       // staged head rows, padded to spread shared-memory banks
const uint LDP = BC / 8u + 1u;  // staged rows of P
const uint HDV = HD / 4u;       // vec4 units per head row
const uint CV = C / 4u;
const float NEG_BIG = -1.0e30;  // finite: exp(NEG_BIG - m) is 0, never NaN

shared uvec4 q_tile[BR * LDH];        // [query][dim]
shared uvec4 k_tile[BC * LDH];        // [key][dim]
shared uvec4 v_tile[BC * LDH];        // [key][dim]
shared uvec4 p_tile[BR * LDP];        // [query][key], f16 softmax weights
shared float s_tile[BR * BC];         // [query][key] scores; also O's rescale scratch
shared float row_m[BR], row_l[BR], row_alpha[BR];  // online softmax: max, sum, rescale

uvec4 halves(vec4 lo, vec4 hi) {
  return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
}

// 8 elements (dims 8c .. 8c + 7) of head h's key or value row j in the caches, as halves.
#if KV_F16
uvec4 cache_halves(bool values, uint h, uint j, uint c) {
  const uint at = kv_cache_at(h, j, 2u * c, HDV);
  const uvec2 a = values ? v_cache[at] : k_cache[at], b = values ? v_cache[at + 1u] : k_cache[at + 1u];
  return uvec4(a, b);
}
#else
uvec4 cache_halves(bool values, uint h, uint j, uint c) {
  const uint at = kv_cache_at(h, j, 2u * c, HDV);
  return values ? halves(v_cache[at], v_cache[at + 1u]) : halves(k_cache[at], k_cache[at + 1u]);
}
#endif

// The workgroup's queries as halves (rows past T: zeros), and each row's softmax state.
void stage_queries(uint tid, uint t0, uint h, uint T) {
  STAGING_LOOP for (uint e = tid; e < BR * HQ; e += LOCAL) {
    const uint r = e / HQ, c = e % HQ, t = t0 + r, at = t * 3u * CV + h * HDV + 2u * c;
    q_tile[r * LDH + c] = t < T ? halves(qkv[at], qkv[at + 1u]) : uvec4(0u);
  }
  for (uint r = tid; r < BR; r += LOCAL) {
    row_m[r] = NEG_BIG;
    row_l[r] = 0.0;
  }
}

// Keys and values j0 .. j0 + BC - 1 as halves (past the last key: zeros).
void stage_keys(uint tid, uint j0, uint last_key, uint h) {
  STAGING_LOOP for (uint e = tid; e < BC * HQ; e += LOCAL) {
    const uint r = e / HQ, c = e % HQ, j = j0 + r;
    k_tile[r * LDH + c] = j <= last_key ? cache_halves(false, h, j, c) : uvec4(0u);
    v_tile[r * LDH + c] = j <= last_key ? cache_halves(true, h, j, c) : uvec4(0u);
  }
}

// The online softmax of this subgroup's rows over keys j0 .. j0 + BC - 1, a row per
// invocation: scale and mask the scores (query row r is at position pos + r), the new max,
// P = exp(S - max) as halves, the sum, and the factor O's row is rescaled by.
void online_softmax(uint my_rows, uint lane, uint j0, uint pos) {
  for (uint r = my_rows + lane; r < my_rows + CM; r += SUBGROUP) {
    const uint q_pos = pos + r;
    float m_new = row_m[r];
    for (uint j = 0u; j < BC; ++j) {
      const float v = j0 + j <= q_pos ? s_tile[r * BC + j] * SCALE : NEG_BIG;
      s_tile[r * BC + j] = v;
      m_new = max(m_new, v);
    }
    float sum = 0.0;
    for (uint j = 0u; j < BC; j += 8u) {
      vec4 lo, hi;
      for (uint i = 0u; i < 4u; ++i) {
        lo[i] = j0 + j + i <= q_pos ? exp(s_tile[r * BC + j + i] - m_new) : 0.0;
        hi[i] = j0 + j + 4u + i <= q_pos ? exp(s_tile[r * BC + j + 4u + i] - m_new) : 0.0;
      }
      sum += (lo.x + lo.y + lo.z + lo.w) + (hi.x + hi.y + hi.z + hi.w);
      p_tile[r * LDP + j / 8u] = halves(lo, hi);
    }
    const float alpha = exp(row_m[r] - m_new);
    row_alpha[r] = alpha;
    row_l[r] = row_l[r] * alpha + sum;
    row_m[r] = m_new;
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint T = pc.T, pos0 = step_pos;
  const uint t0 = gl_WorkGroupID.x * BR, h = gl_WorkGroupID.y;
  const uint last_key = pos0 + min(t0 + BR, T) - 1u;  // the last query's position
  const uint my_rows = sg * CM;                       // this subgroup's first query row

  stage_queries(tid, t0, h, T);
  ACC_T o[HD / CN];
  MATRIX_LOOP for (uint d = 0u; d < HD / CN; ++d) ACC_ZERO(o[d]);

  for (uint j0 = 0u; j0 <= last_key; j0 += BC) {
    barrier();  // the last step's tiles are read
    stage_keys(tid, j0, last_key, h);
    barrier();

    // S = Q K^T for this subgroup's rows.
    ACC_T s[BC / CN];
    MATRIX_LOOP for (uint n = 0u; n < BC / CN; ++n) ACC_ZERO(s[n]);
    MATRIX_LOOP for (uint kk = 0u; kk < HD; kk += CK) {
      A_T a;
      LOAD_A(a, q_tile, my_rows * LDH + kk / 8u, LDH);
      MATRIX_LOOP for (uint n = 0u; n < BC / CN; ++n) {
        B_T b;  // B[k][j] = K[j][k]: the staged key rows are B's columns
        LOAD_B_COLS(b, k_tile, n * CN * LDH + kk / 8u, LDH);
        MUL_ADD(s[n], a, b, q_tile, k_tile);
      }
    }
    MATRIX_LOOP for (uint n = 0u; n < BC / CN; ++n) STORE_ACC(s[n], s_tile, my_rows * BC + n * CN, BC);
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    online_softmax(my_rows, lane, j0, pos0 + t0);
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    // O = O * alpha (row by row, through this subgroup's part of s_tile) + P V.
    const uint scratch = my_rows * BC;
    MATRIX_LOOP for (uint d = 0u; d < HD / CN; ++d) {
      STORE_ACC(o[d], s_tile, scratch, CN);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < CM * CN; e += SUBGROUP) s_tile[scratch + e] *= row_alpha[my_rows + e / CN];
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      LOAD_ACC(o[d], s_tile, scratch, CN);
      subgroupBarrier();
    }
    MATRIX_LOOP for (uint kk = 0u; kk < BC; kk += CK) {
      A_T a;
      LOAD_A(a, p_tile, my_rows * LDP + kk / 8u, LDP);
      MATRIX_LOOP for (uint d = 0u; d < HD / CN; ++d) {
        B_T b;  // B[k][n] = V[key k][dim n], row-major
        LOAD_B_ROWS(b, v_tile, kk * LDH + d * CN / 8u, LDH);
        MUL_ADD(o[d], a, b, p_tile, v_tile);
      }
    }
  }

  // out[t][h*HD + d] = O / l, through shared memory.
  const uint scratch = my_rows * BC;
  MATRIX_LOOP for (uint d = 0u; d < HD / CN; ++d) {
    subgroupBarrier();
    STORE_ACC(o[d], s_tile, scratch, CN);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = lane; e < CM * CN; e += SUBGROUP) {
      const uint r = my_rows + e / CN, t = t0 + r;
      if (t < T) out_[t * C + h * HD + d * CN + e % CN] = s_tile[scratch + e] / row_l[r];
    }
  }
}
