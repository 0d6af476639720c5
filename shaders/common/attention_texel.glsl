// Attention for CPU devices (lavapipe), included by shaders/attention.comp (TEXEL, VEC = 4).
// The workgroup is one subgroup, i.e. one SIMD vector on lavapipe. Each invocation takes
// whole keys, a contiguous run of them (an eighth of the range for 8 invocations), and
// keeps an online-softmax stream per query; the streams merge once at the end by subgroup
// arithmetic. Contiguous runs make each invocation's reads of the (head-major) caches one
// sequential stream the CPU's prefetchers follow, where taking keys in turn (j = lane,
// + WG, ...) would interleave the lanes' reads (bench/PERFORMANCE.md, "What limits it").
//   - Keys and values are fetched through uvec4 texel views of qkv and the caches
//     (bindings 5-7, first texel of each in the push constants): lavapipe vectorises a
//     texel fetch across the lanes, where a storage load is a loop over them. An f16
//     cache (KV_F16) gives eight elements per fetch instead of four.
//   - A workgroup serves QB consecutive queries of one head and every fetched key and value
//     is used by all of them, so a prefill fetches each key a QB-th as often. (Decode: QB=1.)
//   - Every index into the private arrays is a constant after unrolling (the query index
//     by the Q() macros below): on lavapipe an array indexed by a loop variable the compiler
//     keeps moves to per-lane scratch memory, at about twice the attention time. The loops
//     over the head say [[unroll]]: Mesa's own limit would leave the f16 caches' loop over
//     this step's keys (rounded element by element) rolled, with the same scratch-memory
//     cost and a far longer compile at head dim 128.
// Writes (the appended rows, the output) go through the storage bindings.

layout(binding = 5) uniform utextureBuffer qkv_tex;
layout(binding = 6) uniform utextureBuffer k_tex;
layout(binding = 7) uniform utextureBuffer v_tex;
layout(push_constant) uniform Push {
  uint qkv_base, k_base, v_base;  // first texel of each view in its buffer's texel view
  uint T;                         // queries (tokens) in this step
} pc;
// Private copies, filled first thing in main(): on lavapipe a push-constant read inside a
// loop or a branch is a gather over the lanes, and key_at / value_at run in the key loop.
uint qkv_base, k_base, v_base, n_tokens;

const uint WG = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)

// Texel e of head h of key / value j; from_qkv is a constant at every call site.
#if !KV_F16
vec4 key_at(uint j, uint pos0, uint h, uint e, bool from_qkv) {
  return uintBitsToFloat(from_qkv ? texelFetch(qkv_tex, int(qkv_base + (j - pos0) * 3 * CV + CV + h * HDV + e))
                                  : texelFetch(k_tex, int(k_base + cache_index(h, j, e))));
}
vec4 value_at(uint j, uint pos0, uint h, uint e, bool from_qkv) {
  return uintBitsToFloat(from_qkv ? texelFetch(qkv_tex, int(qkv_base + (j - pos0) * 3 * CV + 2 * CV + h * HDV + e))
                                  : texelFetch(v_tex, int(v_base + cache_index(h, j, e))));
}
#else
// f16 caches: vec4 units e and e + 1 (e even) of head h of key / value j, times 2^-112
// (decode_f16_scaled): one texel fetch from a cache (eight halves), two from qkv (f32,
// rounded to f16 as the cache holds them).
// `value` (a constant at every call site, like from_qkv) picks the values, else the keys.
void kv_pair(bool value, uint j, uint pos0, uint h, uint e, bool from_qkv, out vec4 lo, out vec4 hi) {
  if (from_qkv) {
    uint at = qkv_base + (j - pos0) * 3 * CV + (value ? 2 * CV : CV) + h * HDV + e;
    lo = KV_ROUND(uintBitsToFloat(texelFetch(qkv_tex, int(at)))) * (1.0 / F16_SCALED_UNSCALE);
    hi = KV_ROUND(uintBitsToFloat(texelFetch(qkv_tex, int(at + 1u)))) * (1.0 / F16_SCALED_UNSCALE);
  } else {
    uint at = kv_unit_base / 2u + kv_cache_at(h, j, e / 2u, HDV / 2u);  // texels: two units each
    decode_f16_scaled(value ? texelFetch(v_tex, int(v_base + at)) : texelFetch(k_tex, int(k_base + at)), lo, hi);
  }
}
#endif
// What multiplies the keys and values: the query and the softmax weights, times 2^112 when
// those come scaled by 2^-112.
#if KV_F16
const float KV_MUL = F16_SCALED_UNSCALE;
#else
const float KV_MUL = 1.0;
#endif

// Per query i < QB: the scaled query (the same in every invocation), the number of keys it
// sees (causal), and this invocation's stream: running max, sum and accumulator.
vec4 q[QB][HDV];
uint n_keys[QB];
float m[QB], l[QB];
vec4 acc[QB][HDV];

// Statement S for each query index i < QB, i a literal.
#define Q(S)                \
  {                         \
    const uint i = 0u;      \
    S                       \
  }                         \
  if (QB > 1u) {            \
    const uint i = min(1u, QB - 1u); \
    S                       \
  }                         \
  if (QB > 2u) {            \
    const uint i = min(2u, QB - 1u); \
    S                       \
  }                         \
  if (QB > 3u) {            \
    const uint i = min(3u, QB - 1u); \
    S                       \
  }

// Keys begin..end-1, all from the caches or all from qkv, split into WG contiguous runs, one
// per invocation; query i takes key j only if j < n_keys[i].
void key_range(uint begin, uint end, uint pos0, uint h, bool from_qkv) {
  uint run = (end - min(begin, end) + WG - 1u) / WG;
  uint first = begin + gl_SubgroupInvocationID * run, last = min(first + run, end);
  for (uint j = first; j < last; ++j) {
    float s[QB];
    Q(s[i] = 0.0;)
#if !KV_F16
    [[unroll]] for (uint e = 0; e < HDV; ++e) {
      vec4 k = key_at(j, pos0, h, e, from_qkv);
      Q(s[i] += dot(q[i][e], k);)
    }
#else
    [[unroll]] for (uint e = 0; e < HDV; e += 2u) {
      vec4 k0, k1;
      kv_pair(false, j, pos0, h, e, from_qkv, k0, k1);
      Q(s[i] += dot(q[i][e], k0); s[i] += dot(q[i][e + 1u], k1);)
    }
#endif
    float p[QB];
    Q(if (j < n_keys[i] && s[i] > m[i]) {  // new max: rescale what was summed so far
        float corr = exp(m[i] - s[i]);
        l[i] *= corr;
        [[unroll]] for (uint e = 0; e < HDV; ++e) acc[i][e] *= corr;
        m[i] = s[i];
      }
      p[i] = j < n_keys[i] ? exp(s[i] - m[i]) : 0.0;
      l[i] += p[i];)
#if !KV_F16
    [[unroll]] for (uint e = 0; e < HDV; ++e) {
      vec4 v = value_at(j, pos0, h, e, from_qkv);
      Q(acc[i][e] += p[i] * v;)
    }
#else
    float ps[QB];
    Q(ps[i] = p[i] * KV_MUL;)
    [[unroll]] for (uint e = 0; e < HDV; e += 2u) {
      vec4 v0, v1;
      kv_pair(true, j, pos0, h, e, from_qkv, v0, v1);
      Q(acc[i][e] += ps[i] * v0; acc[i][e + 1u] += ps[i] * v1;)
    }
#endif
  }
}

void main() {
  qkv_base = pc.qkv_base;
  k_base = pc.k_base;
  v_base = pc.v_base;
  n_tokens = pc.T;
  uint h = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * QB;
  uint lane = gl_SubgroupInvocationID;
#if ROWS
  // Row t0 is query `in_step` of its sequence's step, whose rows start at qkv row
  // t0 - in_step: the step's keys and values are read from those rows, the query's own
  // appended at its position, its output row t0. A row another dispatch serves is skipped:
  // as a query past T, and with no keys (no early return: on lavapipe all that follows a
  // branch would lose the scalar loads of uniform addresses).
  const uvec4 row = row_table[t0];
  if (row.w != 0u) n_tokens = 0u;
  const uint pos0 = row.x, in_step = row.z;
  kv_unit_base = row.y;
  qkv_base += (t0 - in_step) * 3u * CV;
#else
  uint pos0 = step_pos;
  const uint in_step = 0u;
#endif
  // Queries past T (the last block of a T not divisible by QB) repeat query T - 1 and are
  // neither appended nor stored. Query t sits at position pos0 + t (ROWS: pos0 + in_step).
  Q(uint t = min(t0 + i, n_tokens - 1u);
    uint pos = ROWS != 0 ? pos0 + in_step : pos0 + t;
    if (t0 + i < n_tokens) append_slice_at(h, t, pos, lane);
    n_keys[i] = min(pos + 1u, CONTEXT);
    [[unroll]] for (uint e = 0; e < HDV; ++e) {
      q[i][e] = qkv[t * 3 * CV + h * HDV + e] * SCALE * KV_MUL;
      acc[i][e] = vec4(0.0);
    }
    m[i] = NEG_BIG;
    l[i] = 0.0;)
  // Keys below pos0 come from the caches, this step's from qkv; the block's last query sees
  // the most keys.
  uint n_max = n_tokens == 0u ? 0u : n_keys[QB - 1u];
  if (APPEND) {
    key_range(0, min(pos0, n_max), pos0, h, false);
    key_range(pos0, n_max, pos0, h, true);
  } else {
    key_range(0, n_max, pos0, h, false);
  }

  // Merge each query's streams; a stream that took no key of it has l = 0, acc = 0 and
  // weight exp(NEG_BIG - M) = 0.
  Q(if (t0 + i < n_tokens) {
      float f = exp(m[i] - subgroupMax(m[i]));
      float inv = 1.0 / subgroupAdd(l[i] * f);
      uint o = (t0 + i) * CV + h * HDV;
      [[unroll]] for (uint e = 0; e < HDV; ++e) {
        vec4 v = subgroupAdd(acc[i][e] * f) * inv;
        if (e % WG == lane) out_[o + e] = v;
      }
    })
}
