// Attention of prompt chunks for CPU devices (lavapipe), included by shaders/attention.comp
// (TILED = 1 scores, 2 values): two register-blocked passes, after kv_append has put this
// step's keys and values in the caches (engine/ops/attention.cpp,
// kv_append_attention_tiled). For T queries at positions pos0 .. pos0 + T - 1 (pos0 from
// the step buffer) and each head h:
//   scores: S[h][t][j] = SCALE * q_t,h . k_j,h                  for j <= pos0 + t
//   values: out[t][h*HD + d] = sum_j softmax_j(S[h][t][.]) v_j,h[d]   (online softmax)
// S is a scratch of n_heads * T rows of SROW floats; entries past a query's position are
// never written and never used.
//
// Why two passes: on lavapipe a texel fetch (the only vectorised read) is a call of ~45
// instructions, and the one-dispatch texel kernel (common/attention_texel.glsl) fetches a
// key's and a value's 16-byte pieces per key for every block of up to 4 queries: 4 + 4
// fetches per key and query (64-dim heads) against 128 multiplies and adds. Here a
// workgroup of one SIMD vector owns 8 queries x 32 keys (scores) or 8 queries x 32 dims
// (values) and hands each fetched input to all lanes by subgroupShuffle, as the GEMM kernel
// does (common/linear_gemm_bcast.glsl): ~0.3 fetches per key and query.
//   scores: lane L holds keys j0 + 4L .. j0 + 4L + 3 and the accumulators of all 8 queries
//           for them; it fetches query t0 + L's texel, which the shuffles hand around.
//   values: lane L owns 4 dims (one texel of each value row) for all 8 queries, and keeps
//           query t0 + L's running max and sum: its scores arrive 4 keys per fetch, and
//           each query's weights and rescale factor are shuffled from its lane.
// Grid: scores (ceil(T / LOCAL), n_heads), values (ceil(HD / (4 LOCAL)), ceil(T / LOCAL),
// n_heads); workgroup: one subgroup (LOCAL == gl_SubgroupSize, the host makes it so).

layout(constant_id = 9) const uint SROW = 1024;  // floats per scores row (CONTEXT rounded up to 4)

const uint LOCAL = gl_WorkGroupSize.x;
const uint HDV = HD / 4u;  // vec4 units per head row (texels of f32)
const uint KV_PACK = KV_F16 != 0 ? 2u : 1u;  // vec4 units per texel of a cache
const uint CV = C / 4u;    // texels per qkv third
const uint TN = 4u;        // scores: keys per lane
const uint KB = LOCAL * TN;  // scores: keys per workgroup pass
const float NEG_BIG = -1e30;

// Texel views of whole buffers; the push constants say where this dispatch's data starts.
layout(binding = 0) uniform utextureBuffer qkv_tex;
layout(binding = 1) uniform utextureBuffer k_tex;
layout(binding = 2) uniform utextureBuffer v_tex;
layout(binding = 3) uniform utextureBuffer s_tex;
#define STEP_BINDING 4
#include "common/step.glsl"
layout(std430, binding = 5) buffer Scores { vec4 scores[]; };  // rows of SROW floats
layout(std430, binding = 6) writeonly buffer Out { vec4 out_[]; };
layout(push_constant) uniform Push {
  uint qkv_base, k_base, v_base, s_base;  // first texel of each view's data
  uint T;                                 // queries in this step
} pc;
// Private copies, read first thing: on lavapipe a push-constant read in a loop or branch
// is a gather over the lanes.
uint qkv_base, k_base, v_base, s_base, n_tokens;
void read_push_constants() {
  qkv_base = pc.qkv_base;
  k_base = pc.k_base;
  v_base = pc.v_base;
  s_base = pc.s_base;
  n_tokens = pc.T;
}

vec4 fetch(utextureBuffer tex, uint texel) { return uintBitsToFloat(texelFetch(tex, int(texel))); }

// acc + dot(a, b) as multiplies and adds in a fixed order (lavapipe has no fused multiply-add).
float dot_acc(vec4 a, vec4 b, float acc) { return acc + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

// Statement S once per query c < LOCAL of the workgroup, c a literal (private arrays are
// indexed by constants only: an index the compiler cannot fold moves the array to per-lane
// scratch memory on lavapipe).
#define EACH_QUERY(S) \
  { const uint c = 0u; S } { const uint c = 1u; S } { const uint c = 2u; S } { const uint c = 3u; S } \
  if (LOCAL > 4u) { { const uint c = 4u; S } { const uint c = 5u; S } { const uint c = 6u; S } { const uint c = 7u; S } } \
  if (LOCAL > 8u) { { const uint c = 8u; S } { const uint c = 9u; S } { const uint c = 10u; S } { const uint c = 11u; S } \
                    { const uint c = 12u; S } { const uint c = 13u; S } { const uint c = 14u; S } { const uint c = 15u; S } }
const uint MAXQ = 16u;  // EACH_QUERY's limit: the host keeps LOCAL <= 16

#if TILED == 1  // scores
void main() {
  read_push_constants();
  uint lane = gl_SubgroupInvocationID;
  uint t0 = gl_WorkGroupID.x * LOCAL, h = gl_WorkGroupID.y;
  uint pos0 = step_pos;
  uint last_key = pos0 + min(t0 + LOCAL, n_tokens) - 1u;  // the block's last query sees keys 0..last_key
  // Queries past T repeat query T - 1; their scores are not stored.
  uint q_texel = qkv_base + min(t0 + lane, n_tokens - 1u) * 3u * CV + h * HDV;
  for (uint j0 = 0u; j0 <= last_key; j0 += KB) {
    uint k_texel[TN];
    for (uint i = 0u; i < TN; ++i) k_texel[i] = k_base + kv_cache_at(h, min(j0 + lane * TN + i, last_key), 0u, HDV / KV_PACK);
    float acc[MAXQ][TN];
    EACH_QUERY(for (uint i = 0u; i < TN; ++i) acc[c][i] = 0.0;)
#if !KV_F16
    for (uint e = 0u; e < HDV; ++e) {
      vec4 q = fetch(qkv_tex, q_texel + e);
      vec4 k[TN];
      for (uint i = 0u; i < TN; ++i) k[i] = fetch(k_tex, k_texel[i] + e);
      EACH_QUERY(vec4 qc = subgroupShuffle(q, c); for (uint i = 0u; i < TN; ++i) acc[c][i] = dot_acc(k[i], qc, acc[c][i]);)
    }
#else  // an f16 texel holds two vec4 units of a key row: k_texel counts those texels
    for (uint e = 0u; e < HDV; e += 2u) {
      // keys come times 2^-112 (decode_f16_scaled), so the query goes times 2^112
      vec4 q0 = fetch(qkv_tex, q_texel + e) * F16_SCALED_UNSCALE, q1 = fetch(qkv_tex, q_texel + e + 1u) * F16_SCALED_UNSCALE;
      vec4 k0[TN], k1[TN];
      for (uint i = 0u; i < TN; ++i) decode_f16_scaled(texelFetch(k_tex, int(k_texel[i] + e / 2u)), k0[i], k1[i]);
      EACH_QUERY(vec4 qc = subgroupShuffle(q0, c); vec4 qd = subgroupShuffle(q1, c);
                 for (uint i = 0u; i < TN; ++i) acc[c][i] = dot_acc(k1[i], qd, dot_acc(k0[i], qc, acc[c][i]));)
    }
#endif
    // One 16-byte store per query (on lavapipe each store is a loop over the lanes): the
    // lane's 4 keys go out together when the first is visible to the query; the others may
    // be past its position, which the values pass never reads.
    uint j = j0 + lane * TN;
    EACH_QUERY(if (t0 + c < n_tokens && j <= pos0 + t0 + c)
                 scores[((h * n_tokens + t0 + c) * SROW + j) / 4u] =
                     vec4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]) * SCALE;)
  }
}
#endif

#if TILED == 2  // values
void main() {
  read_push_constants();
  uint lane = gl_SubgroupInvocationID;
  uint dims = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * LOCAL, h = gl_WorkGroupID.z;
  uint pos0 = step_pos;
  uint n_keys = pos0 + min(t0 + LOCAL, n_tokens);  // keys the block's last query sees
  uint e = min(dims * LOCAL + lane, HDV - 1u);     // this lane's texel of each value row
  uint my_t = min(t0 + lane, n_tokens - 1u);       // this lane's query: its scores and softmax state
  uint my_last = pos0 + my_t;
  uint s_texel = s_base + (h * n_tokens + my_t) * (SROW / 4u);
  // An f16 texel holds two vec4 units: this lane's is half `e % 2` of texel e / 2.
  uint v_texel = v_base + kv_cache_at(h, 0u, e / KV_PACK, HDV / KV_PACK);
  float m = NEG_BIG, l = 0.0;
  vec4 acc[MAXQ];
  EACH_QUERY(acc[c] = vec4(0.0);)
  // 8 keys per iteration: llvmpipe blends every loop-carried value (the accumulators of all
  // queries) with the loop's lane mask once per iteration.
  for (uint j = 0u; j < n_keys; j += 8u) {
    // Scores past this lane's query (never written) are masked before they are used; the
    // second texel stays inside the row.
    vec4 sa = fetch(s_tex, s_texel + j / 4u);
    vec4 sb = fetch(s_tex, s_texel + min(j / 4u + 1u, SROW / 4u - 1u));
    sa = mix(vec4(NEG_BIG), sa, lessThanEqual(uvec4(j, j + 1u, j + 2u, j + 3u), uvec4(my_last)));
    sb = mix(vec4(NEG_BIG), sb, lessThanEqual(uvec4(j + 4u, j + 5u, j + 6u, j + 7u), uvec4(my_last)));
    float m_new = max(m, max(max(max(sa.x, sa.y), max(sa.z, sa.w)), max(max(sb.x, sb.y), max(sb.z, sb.w))));
    float corr = exp(m - m_new);
    vec4 pa = exp(sa - m_new), pb = exp(sb - m_new);
    l = l * corr + (((pa.x + pa.y) + (pa.z + pa.w)) + ((pb.x + pb.y) + (pb.z + pb.w)));
    m = m_new;
    // Rows past the last written key read the last one instead (their weights are 0).
    vec4 v[8];
#if !KV_F16
    for (uint k = 0u; k < 8u; ++k) v[k] = fetch(v_tex, v_texel + min(j + k, n_keys - 1u) * HDV);
#else
    for (uint k = 0u; k < 8u; ++k) {
      vec4 lo, hi;
      decode_f16_scaled(texelFetch(v_tex, int(v_texel + min(j + k, n_keys - 1u) * (HDV / 2u))), lo, hi);
      v[k] = e % 2u == 0u ? lo : hi;
    }
    // values come times 2^-112, so their weights go times 2^112 (l keeps the unscaled ones)
    pa *= F16_SCALED_UNSCALE;
    pb *= F16_SCALED_UNSCALE;
#endif
    EACH_QUERY(float cc = subgroupShuffle(corr, c); vec4 qa = subgroupShuffle(pa, c); vec4 qb = subgroupShuffle(pb, c);
               acc[c] = acc[c] * cc + qa.x * v[0] + qa.y * v[1] + qa.z * v[2] + qa.w * v[3]
                                    + qb.x * v[4] + qb.y * v[5] + qb.z * v[6] + qb.w * v[7];)
  }
  float inv = 1.0 / l;
  vec4 res[MAXQ];
  EACH_QUERY(res[c] = acc[c] * subgroupShuffle(inv, c);)
  bool my_dims = dims * LOCAL + lane < HDV;
  [[dont_unroll]] for (uint c = 0u; c < LOCAL; ++c)
    if (my_dims && t0 + c < n_tokens) out_[(t0 + c) * CV + h * HDV + e] = res[c];
}
#endif
