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
// The f16 bits of f, rounded to nearest even with integer operations, and clamped to f16's
// largest finite value (an outlier saturates rather than becoming inf, and NaN in the
// softmax). Not packHalf2x16: Vulkan lets the device round its conversion either way, and
// NVIDIA's compiler (driver 580) folds unpackHalf2x16(packHalf2x16(v)) into v, so the
// appending kernels' KV_ROUND kept this step's keys unrounded while the cache held them
// rounded (f16-cache attention off by up to 4e-3 of its largest output on an H100).
// Four at once, without branches (selects): the appending kernels round every element of
// this step's keys and values, and lavapipe compiles straight-line code faster (the CPU
// devices' f16 decode attention at head dim 128 compiles in about two thirds of the time).
uvec4 kv_f16_bits(vec4 f) {
  uvec4 x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  // |f| < 2^-14: an f16 subnormal, in 2^-24 steps.
  uvec4 subnormal = uvec4(roundEven(uintBitsToFloat(min(a, 0x38800000u)) * 16777216.0));
  // Normal: exponent rebased from 127 to 15, mantissa rounded from 23 bits to 10 (a carry
  // out of the mantissa steps the exponent, as it should).
  uvec4 r = a - 0x38000000u;
  uvec4 normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  uvec4 bits = mix(normal, subnormal, lessThan(a, uvec4(0x38800000u)));
  // |f| >= 65504 (or NaN): the largest finite.
  return sign | mix(bits, uvec4(0x7bffu), greaterThanEqual(a, uvec4(0x477fe000u)));
}
uvec2 kv_encode(vec4 v) {
  uvec4 b = kv_f16_bits(v);
  return uvec2(b.x | (b.y << 16), b.z | (b.w << 16));
}
// The kernels of CPU devices (texel fetches) decode a 16-byte texel of eight halves as the
// f16 weights are, into value * 2^-112 (decode_f16_scaled), and multiply what meets them,
// the query and the softmax weights, by 2^112 (F16_SCALED_UNSCALE): products are then
// exactly the unscaled ones.
#include "common/f16_scaled.glsl"
#else
#define KV_UNIT VT
#define KV_LOAD(u) (u)
#define KV_STORE(v) (v)
#define KV_ROUND(v) (v)
#endif
