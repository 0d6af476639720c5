#version 450
#extension GL_GOOGLE_include_directive : require
// Causal multi-head attention over a layer's KV cache, one workgroup per (head, query):
//   out[t][h*HD + d] = sum_{j <= pos0 + t} softmax_j(q_t,h . k_j,h * SCALE) v_j,h[d]
// q comes from the fused projection qkv[t][0:C] (row stride 3C). pos0 is read from the step
// buffer: the key count is a run-time loop bound, so one recorded dispatch serves every
// decode position up to CONTEXT.
//
// Keys j < pos0 always come from the caches. This step's keys (pos0 <= j <= pos0 + t):
//   APPEND = 0: from the caches too (kv_append ran before, in its own dispatch);
//   APPEND = 1: straight from qkv, and workgroup (h, t) also writes its head's slice of
//               key/value t to cache row pos0 + t. No workgroup reads a row that this
//               dispatch writes, so kv_append and attention become one dispatch.
//
// Each workgroup splits its keys between independent online-softmax streams (running max m,
// sum l, accumulator acc[HD]) and merges them once at the end, so the key loop itself has
// no barrier:
//   subgroup: a stream is one subgroup; its lanes split the head dims (lane owns elements
//             e = lane, lane + SG, ...), a key's score is one subgroupAdd, consecutive
//             lanes read consecutive memory. Keys go in blocks of KB so that the max and
//             the accumulator rescale happen once per block. Streams take blocks in turn.
//   shared:   no subgroup arithmetic: a stream is one invocation taking whole keys (full
//             dot product, private acc[HD]); the streams merge through shared memory,
//             CHUNK dims at a time so the scratch fits a small shared memory.
// VEC = 4 reads the caches as vec4 (HD % 4 == 0): on lavapipe every load of a
// non-uniform address is a loop over the SIMD lanes, so 16-byte loads cost about a quarter
// of four float loads.
//   wide:     (GPUs) a workgroup of up to 1024 invocations per (head, query), all keys'
//             scores at once into shared memory, then all values (common/attention_wide.glsl);
//   texel:    (CPU devices) like shared, but keys and values are texel fetches, QB queries
//             share each fetch, and the streams merge by subgroup arithmetic
//             (common/attention_texel.glsl).
// The tiled variants (CPU devices, prompt chunks) are not this kernel but two passes over a
// scores scratch, after kv_append: common/attention_tiled.glsl.
// Grid: (n_heads, T), texel: (n_heads, ceil(T / QB)). Workgroup: local_size_x (spec 0).
//
// ROWS (texel, APPEND, QB = 1): the rows of several sequences' steps, each over its own KV
// slot: a batched decode step (a row per sequence) or a burst of short prompts (a run of
// rows per sequence). Binding 1 is then a table per row (its step's first position, its KV
// slot, its index in the step, whether to skip it) instead of the step buffer, and the
// caches bound are pools of equal slots (models/kv_pool.hpp): row t attends as that query
// of its own sequence's step in that slot, with the same arithmetic, so all rows take one
// dispatch.

//! variant subgroup USE_SUBGROUP=1 VEC=1
//! variant subgroup_vec4 USE_SUBGROUP=1 VEC=4
//! variant shared USE_SUBGROUP=0 VEC=1
//! variant shared_vec4 USE_SUBGROUP=0 VEC=4
//! variant texel USE_SUBGROUP=0 VEC=4 TEXEL=1
//! variant wide USE_SUBGROUP=1 VEC=1 WIDE=1
//! variant wide_vec4 USE_SUBGROUP=1 VEC=4 WIDE=1
//! variant tiled_scores USE_SUBGROUP=0 VEC=4 TILED=1
//! variant tiled_values USE_SUBGROUP=0 VEC=4 TILED=2
// *_kvf16: the same over f16 caches (common/kv_cache.glsl; vec4 only, head_dim % 8 == 0).
//! variant subgroup_vec4_kvf16 USE_SUBGROUP=1 VEC=4 KV_F16=1
//! variant shared_vec4_kvf16 USE_SUBGROUP=0 VEC=4 KV_F16=1
//! variant texel_kvf16 USE_SUBGROUP=0 VEC=4 TEXEL=1 KV_F16=1
//! variant texel_rows USE_SUBGROUP=0 VEC=4 TEXEL=1 ROWS=1
//! variant texel_rows_kvf16 USE_SUBGROUP=0 VEC=4 TEXEL=1 ROWS=1 KV_F16=1
//! variant wide_vec4_kvf16 USE_SUBGROUP=1 VEC=4 WIDE=1 KV_F16=1
//! variant tiled_scores_kvf16 USE_SUBGROUP=0 VEC=4 TILED=1 KV_F16=1
//! variant tiled_values_kvf16 USE_SUBGROUP=0 VEC=4 TILED=2 KV_F16=1

#ifndef TEXEL
#define TEXEL 0
#endif
#ifndef TILED
#define TILED 0
#endif
#ifndef WIDE
#define WIDE 0
#endif
#ifndef ROWS
#define ROWS 0
#endif

#if USE_SUBGROUP || TEXEL
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#if TILED
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_samplerless_texture_functions : require
#endif
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD = 64;          // head dim
layout(constant_id = 2) const uint C = 768;          // n_heads * HD; qkv rows are 3C
layout(constant_id = 3) const uint CONTEXT = 1024;   // positions in each cache
layout(constant_id = 4) const float SCALE = 0.125;   // 1 / sqrt(HD)
layout(constant_id = 5) const uint SG = 8;           // subgroup variant: the device's subgroup size
layout(constant_id = 6) const uint CHUNK = 64;       // shared variant: dims merged per pass
layout(constant_id = 7) const bool APPEND = false;   // also append this step's keys/values
layout(constant_id = 8) const uint QB = 1;           // texel variant: queries per workgroup (1-4)
// constant_id 9: the tiled variants' scores row (common/attention_tiled.glsl).

#if TILED
#include "common/kv_cache.glsl"
#include "common/attention_tiled.glsl"
#else

#if VEC == 4
#define VT vec4
#define VDOT(a, b) dot(a, b)
#define COMP(x, c) (x)[c]  // component c of a VT
#else
#define VT float
#define VDOT(a, b) ((a) * (b))
#define COMP(x, c) (x)
#endif

// Everything in units of VT.
layout(std430, binding = 0) readonly buffer Qkv { VT qkv[]; };
#if ROWS
// Per row: (its step's first position, first KV_UNIT of its slot, its index in the step, skip)
layout(std430, binding = 1) readonly buffer RowTable { uvec4 row_table[]; };
#else
#define STEP_BINDING 1
#include "common/step.glsl"
#endif
// Where this workgroup's sequence's caches start in the bound ones, in KV_UNITs (a pool's
// slot with ROWS; else 0). Set first thing in main().
uint kv_unit_base = 0;

const uint HDV = HD / VEC;  // head width
const uint CV = C / VEC;    // qkv rows are 3 * CV

#include "common/kv_cache.glsl"
layout(std430, binding = 2) buffer KCache { KV_UNIT k_cache[]; };
layout(std430, binding = 3) buffer VCache { KV_UNIT v_cache[]; };
layout(std430, binding = 4) writeonly buffer Out { VT out_[]; };
// Element e (in VT units) of head h's key (value) at position j in the caches.
uint cache_index(uint h, uint j, uint e) { return kv_unit_base + kv_cache_at(h, j, e, HDV); }

// Start of the running max: finite, so exp(m - m_new) is exp(-huge) = 0 and never NaN.
const float NEG_BIG = -1.0e30;

// Element e of head h of key / value j. The caller's `from_qkv` is a constant at every
// call site, so after inlining no load carries a branch (on lavapipe a branch around a load
// would run both sides' per-lane load loops).
#if !TEXEL  // (the texel kernel fetches its own: common/attention_texel.glsl)
VT key_at(uint j, uint pos0, uint h, uint e, bool from_qkv) {
  return from_qkv ? KV_ROUND(qkv[(j - pos0) * 3 * CV + CV + h * HDV + e]) : KV_LOAD(k_cache[cache_index(h, j, e)]);
}
VT value_at(uint j, uint pos0, uint h, uint e, bool from_qkv) {
  return from_qkv ? KV_ROUND(qkv[(j - pos0) * 3 * CV + 2 * CV + h * HDV + e]) : KV_LOAD(v_cache[cache_index(h, j, e)]);
}
#endif

// APPEND: the workgroup's invocations copy its head's slice of key/value t to cache
// position pos0 + t (dropped past the end of the cache, which the host never asks for).
// Head h's slice of the key and value in qkv row `t` to cache row `pos`.
void append_slice_at(uint h, uint t, uint pos, uint lid) {
  if (!APPEND || pos >= CONTEXT) return;
  for (uint e = lid; e < HDV; e += gl_WorkGroupSize.x) {
    uint col = h * HDV + e;
    k_cache[cache_index(h, pos, e)] = KV_STORE(qkv[t * 3 * CV + CV + col]);
    v_cache[cache_index(h, pos, e)] = KV_STORE(qkv[t * 3 * CV + 2 * CV + col]);
  }
}
void append_slice(uint h, uint t, uint pos0, uint lid) { append_slice_at(h, t, pos0 + t, lid); }

#if WIDE

#include "common/attention_wide.glsl"

#elif USE_SUBGROUP

const uint NSG = gl_WorkGroupSize.x / SG;  // streams (subgroups) per workgroup
const uint DPL = (HDV + SG - 1) / SG;      // elements of the head per lane
const uint KB = 4;                         // keys per block

shared float sh_m[NSG];
shared float sh_l[NSG];
shared VT sh_acc[NSG * HDV];

// This stream's state: lane-owned query elements (scaled), their indices in the head, the
// running max, sum and accumulator.
VT qv[DPL];
uint elem[DPL];
VT acc[DPL];
float m = NEG_BIG, l = 0.0;

// Keys begin..end-1, all from the caches or all from qkv; blocks of KB keys, taken by the
// workgroup's subgroups in turn.
void key_range(uint begin, uint end, uint pos0, uint h, bool from_qkv) {
  uint sg = gl_SubgroupID;
  for (uint j0 = begin + sg * KB; j0 < end; j0 += NSG * KB) {
    // Keys past `end` in the last block re-read the last valid key and are masked below.
    float s[KB];
    for (uint k = 0; k < KB; ++k) {
      uint j = min(j0 + k, end - 1);
      float part = 0.0;
      [[unroll]] for (uint i = 0; i < DPL; ++i) part += VDOT(qv[i], key_at(j, pos0, h, elem[i], from_qkv));
      s[k] = subgroupAdd(part);
    }
    float m_new = max(m, s[0]);  // key j0 < end always
    for (uint k = 1; k < KB; ++k)
      if (j0 + k < end) m_new = max(m_new, s[k]);
    float corr = exp(m - m_new);
    l *= corr;
    [[unroll]] for (uint i = 0; i < DPL; ++i) acc[i] *= corr;
    for (uint k = 0; k < KB; ++k) {
      if (j0 + k >= end) break;
      float p = exp(s[k] - m_new);
      l += p;
      [[unroll]] for (uint i = 0; i < DPL; ++i) acc[i] += p * value_at(j0 + k, pos0, h, elem[i], from_qkv);
    }
    m = m_new;
  }
}

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  uint pos0 = step_pos;
  uint n_keys = min(pos0 + t + 1, CONTEXT);
  uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
  append_slice(h, t, pos0, gl_LocalInvocationID.x);

  // Lanes past HDV (HDV not a multiple of SG) read a valid element with q = 0, so the key
  // loop needs no bounds test; their accumulators are never stored.
  [[unroll]] for (uint i = 0; i < DPL; ++i) {
    uint e = lane + i * SG;
    elem[i] = min(e, HDV - 1);
    qv[i] = e < HDV ? qkv[t * 3 * CV + h * HDV + e] * SCALE : VT(0.0);
    acc[i] = VT(0.0);
  }
  if (APPEND) {
    key_range(0, min(pos0, n_keys), pos0, h, false);
    key_range(pos0, n_keys, pos0, h, true);
  } else {
    key_range(0, n_keys, pos0, h, false);
  }

  uint o = t * CV + h * HDV;
  if (NSG == 1) {
    float inv = 1.0 / l;
    [[unroll]] for (uint i = 0; i < DPL; ++i) {
      uint e = lane + i * SG;
      if (e < HDV) out_[o + e] = acc[i] * inv;
    }
    return;
  }
  // Merge the streams: rescale each to the common max and add. A stream that saw no key
  // (fewer keys than streams) has l = 0, acc = 0 and weight exp(NEG_BIG - M) = 0.
  if (subgroupElect()) {
    sh_m[sg] = m;
    sh_l[sg] = l;
  }
  [[unroll]] for (uint i = 0; i < DPL; ++i) {
    uint e = lane + i * SG;
    if (e < HDV) sh_acc[sg * HDV + e] = acc[i];
  }
  barrier();
  float big = sh_m[0];
  for (uint s = 1; s < NSG; ++s) big = max(big, sh_m[s]);
  for (uint e = gl_LocalInvocationID.x; e < HDV; e += gl_WorkGroupSize.x) {
    VT num = VT(0.0);
    float den = 0.0;
    for (uint s = 0; s < NSG; ++s) {
      float f = exp(sh_m[s] - big);
      num += sh_acc[s * HDV + e] * f;
      den += sh_l[s] * f;
    }
    out_[o + e] = num / den;
  }
}

#elif TEXEL

#include "common/attention_texel.glsl"

#else  // shared

const uint WG = gl_WorkGroupSize.x;

shared float sh_m[WG];
shared float sh_l[WG];
shared float sh_acc[WG * CHUNK];

// This stream's state: the whole (scaled) query in registers, the running max, sum and
// accumulator.
VT q[HDV];
VT acc[HDV];
float m = NEG_BIG, l = 0.0;

// Keys begin..end-1, all from the caches or all from qkv, one per invocation in turn.
void key_range(uint begin, uint end, uint pos0, uint h, bool from_qkv) {
  for (uint j = begin + gl_LocalInvocationID.x; j < end; j += WG) {
    float s = 0.0;
    [[unroll]] for (uint e = 0; e < HDV; ++e) s += VDOT(q[e], key_at(j, pos0, h, e, from_qkv));
    if (s > m) {  // new max: rescale what was summed so far
      float corr = exp(m - s);
      l *= corr;
      [[unroll]] for (uint e = 0; e < HDV; ++e) acc[e] *= corr;
      m = s;
    }
    float p = exp(s - m);
    l += p;
    [[unroll]] for (uint e = 0; e < HDV; ++e) acc[e] += p * value_at(j, pos0, h, e, from_qkv);
  }
}

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  uint pos0 = step_pos;
  uint n_keys = min(pos0 + t + 1, CONTEXT);
  uint lid = gl_LocalInvocationID.x;
  append_slice(h, t, pos0, lid);

  [[unroll]] for (uint e = 0; e < HDV; ++e) {
    q[e] = qkv[t * 3 * CV + h * HDV + e] * SCALE;
    acc[e] = VT(0.0);
  }
  if (APPEND) {
    key_range(0, min(pos0, n_keys), pos0, h, false);
    key_range(pos0, n_keys, pos0, h, true);
  } else {
    key_range(0, n_keys, pos0, h, false);
  }

  // Merge the WG streams; an idle stream (lid >= n_keys) has weight exp(NEG_BIG - M) = 0.
  sh_m[lid] = m;
  barrier();
  float big = sh_m[0];
  for (uint i = 1; i < WG; ++i) big = max(big, sh_m[i]);
  float f = exp(m - big);
  sh_l[lid] = l * f;
  barrier();
  float den = 0.0;
  for (uint i = 0; i < WG; ++i) den += sh_l[i];
  float inv = 1.0 / den;

  // Output dims d0 .. d0 + CHUNK - 1 per pass; CHUNK is a multiple of VEC.
  uint o = t * CV + h * HDV;
  [[unroll]] for (uint d0 = 0; d0 < HD; d0 += CHUNK) {
    [[unroll]] for (uint dd = 0; dd < CHUNK; ++dd) {
      uint d = d0 + dd;
      if (d < HD) sh_acc[lid * CHUNK + dd] = COMP(acc[d / VEC], d % VEC) * f;
    }
    barrier();
    for (uint ev = lid; ev * VEC < CHUNK && d0 + ev * VEC < HD; ev += WG) {
      VT num = VT(0.0);
      for (uint i = 0; i < WG; ++i)
        for (uint c = 0; c < VEC; ++c) COMP(num, c) += sh_acc[i * CHUNK + ev * VEC + c];
      out_[o + d0 / VEC + ev] = num * inv;
    }
    barrier();  // the next pass overwrites sh_acc
  }
}

#endif

#endif  // !TILED
