// Layout of a layer's key and value caches, shared by kv_append.comp and attention.comp:
// head-major, [n_heads][CONTEXT][head dim], so a head's keys are one contiguous run its
// attention workgroup streams in order (engine/ops/attention.hpp, kv_cache_index, is the
// same on the host). Include after the shader's CONTEXT spec constant.

// Index of element e of head h's key (or value) at position j, in units of which a head's
// row holds `head_width`.
uint kv_cache_at(uint h, uint j, uint e, uint head_width) { return (h * CONTEXT + j) * head_width + e; }

// Element type of the caches. f32 by default; KV_F16 (the *_kvf16 variants, vec4 units,
// head_dim % 8 == 0) stores f16, four to a uvec2 (a vec4 unit) and eight to a 16-byte
// texel: half the bytes every decode step streams. KV_LOAD / KV_STORE convert one unit.
#ifndef KV_F16
#define KV_F16 0
#endif
#if KV_F16
#define KV_UNIT uvec2
#define KV_LOAD(u) kv_decode(u)
#define KV_STORE(v) kv_encode(v)
// A key or value read straight from qkv (this step's, by the appending kernels) as the
// cache holds it, so that every path attends to the same numbers.
#define KV_ROUND(v) kv_decode(kv_encode(v))
vec4 kv_decode(uvec2 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
// Clamped to f16's largest finite value: an outlier saturates rather than becoming inf
// (and NaN in the softmax).
uvec2 kv_encode(vec4 v) {
  v = clamp(v, vec4(-65504.0), vec4(65504.0));
  return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
}
// The kernels of CPU devices (texel fetches) decode a 16-byte texel of eight halves with
// integer operations, as the f16 weights are (common/linear_io.glsl): into f32 bits worth
// value * 2^-112, exact for every half (unpackHalf2x16 costs lavapipe vpmovdw + vcvtph2ps on
// the shuffle port its texel fetches need). The caller multiplies what meets them, the query
// and the softmax weights, by KV_UNSCALE = 2^112: products are then exactly the unscaled
// ones. lo = elements 0..3, hi = 4..7.
const float KV_UNSCALE = 5192296858534827628530496329220096.0;  // 2^112
void kv_decode_texel_scaled(uvec4 u, out vec4 lo, out vec4 hi) {
  vec4 a = uintBitsToFloat(uvec4(ivec4(u << 16) >> 3) & 0x8FFFE000u);  // elements 0, 2, 4, 6
  vec4 b = uintBitsToFloat(uvec4(ivec4(u) >> 3) & 0x8FFFE000u);        // elements 1, 3, 5, 7
  lo = vec4(a.x, b.x, a.y, b.y);
  hi = vec4(a.z, b.z, a.w, b.w);
}
#else
#define KV_UNIT VT
#define KV_LOAD(u) (u)
#define KV_STORE(v) (v)
#define KV_ROUND(v) (v)
#endif
