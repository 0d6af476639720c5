#version 450
#extension GL_GOOGLE_include_directive : require
// Appends one step's keys and values to a layer's KV cache: for each token t of the step,
// key pos0 + t of every head from qkv[t][C:2C] and its value from qkv[t][2C:3C], with pos0
// read from the step buffer so a recorded decode graph appends at the current position on
// every replay. The caches are head-major (common/kv_cache.glsl). Grid: x over the C
// columns (VEC at a time), y over the T tokens.
// VEC = 4 (head_dim % 4 == 0) moves 16 bytes per load and store: on lavapipe each
// storage access is a loop over the lanes, so a quarter as many of them (the workgroup
// overhead stays: bench/PERFORMANCE.md, "Prefill: attention").
// KV_F16: f16 caches (common/kv_cache.glsl), vec4 units only.

//! variant scalar VEC=1
//! variant vec4 VEC=4
//! variant vec4_kvf16 VEC=4 KV_F16=1

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint C = 768;        // embedding width (n_heads * head_dim)
layout(constant_id = 2) const uint CONTEXT = 1024; // positions in each cache
layout(constant_id = 3) const uint HD = 64;        // head dim
#include "common/kv_cache.glsl"

#if VEC == 4
#define VT vec4
#else
#define VT float
#endif
const uint CV = C / VEC, HDV = HD / VEC;  // in units of VT

layout(std430, binding = 0) readonly buffer Qkv { VT qkv[]; };
#define STEP_BINDING 1
#include "common/step.glsl"
layout(std430, binding = 2) writeonly buffer KCache { KV_UNIT k_cache[]; };
layout(std430, binding = 3) writeonly buffer VCache { KV_UNIT v_cache[]; };

void main() {
  uint c = gl_GlobalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  uint row = step_pos + t;
  // A position past the cache would write out of bounds: the host never asks for one, and
  // if it did the row is dropped rather than corrupting other memory.
  if (c >= CV || row >= CONTEXT) return;
  uint src = t * 3 * CV + c;
  uint dst = kv_cache_at(c / HDV, row, c % HDV, HDV);
  k_cache[dst] = KV_STORE(qkv[src + CV]);
  v_cache[dst] = KV_STORE(qkv[src + 2 * CV]);
}
