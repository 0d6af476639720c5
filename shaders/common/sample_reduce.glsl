// Workgroup reductions for the sampler and argmax (shaders/sample.comp,
// tests/shaders/argmax.comp).
// Include after `layout(local_size_x_id = 0) in;` and a spec constant SLOTS: room for the
// partial results a reduction gathers, one per subgroup with USE_SUBGROUP and one per
// invocation without. With subgroups the host sizes SLOTS for subgroups of 8 or more
// invocations (a device may run smaller ones than it reports), or sets it to 1 when the
// workgroup is exactly one subgroup. The partials are added serially in slot order, so the
// result is the same bits on every invocation and on every run (the sampler must be
// deterministic).
// Call from workgroup-uniform control flow only: the functions contain barriers, and each
// starts with one so it never overwrites partials a previous call is still reading.
// When the workgroup is a single subgroup (lavapipe) they are pure subgroup operations.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SAMPLE_SLOT gl_SubgroupID
#define SAMPLE_PARTIALS (SLOTS == 1 ? 1u : gl_NumSubgroups)
#else
#define SAMPLE_SLOT gl_LocalInvocationID.x
#define SAMPLE_PARTIALS SLOTS
#endif

const uint NSUM = 8;  // lanes of wg_sums: the candidates of one radix-8 search pass

shared float red_f[NSUM * SLOTS];
shared uint red_u[2 * SLOTS];
shared float red_res[NSUM];

#include "common/order_key.glsl"

float key_value(uint k) {
  return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7FFFFFFFu) : ~k);
}

// Maximum of a uint over the workgroup (minimum: ~wg_max_u(~v)).
uint wg_max_u(uint v) {
#ifdef USE_SUBGROUP
  v = subgroupMax(v);
  if (SLOTS == 1) return v;
  barrier();
  if (subgroupElect()) red_u[SAMPLE_SLOT] = v;
#else
  barrier();
  red_u[SAMPLE_SLOT] = v;
#endif
  barrier();
  uint m = red_u[0];
  for (uint i = 1; i < SAMPLE_PARTIALS; ++i) m = max(m, red_u[i]);
  return m;
}

// Component-wise maximum of a uvec2 over the workgroup.
uvec2 wg_max_u2(uvec2 v) {
#ifdef USE_SUBGROUP
  v = subgroupMax(v);
  if (SLOTS == 1) return v;
  barrier();
  if (subgroupElect()) {
    red_u[SAMPLE_SLOT] = v.x;
    red_u[SLOTS + SAMPLE_SLOT] = v.y;
  }
#else
  barrier();
  red_u[SAMPLE_SLOT] = v.x;
  red_u[SLOTS + SAMPLE_SLOT] = v.y;
#endif
  barrier();
  uvec2 m = uvec2(red_u[0], red_u[SLOTS]);
  for (uint i = 1; i < SAMPLE_PARTIALS; ++i) m = max(m, uvec2(red_u[i], red_u[SLOTS + i]));
  return m;
}

// NSUM workgroup sums at once (one barrier round for all of them).
void wg_sums(inout float v[NSUM]) {
#ifdef USE_SUBGROUP
  for (uint c = 0; c < NSUM; ++c) v[c] = subgroupAdd(v[c]);
  if (SLOTS == 1) return;
  barrier();
  if (subgroupElect())
    for (uint c = 0; c < NSUM; ++c) red_f[c * SLOTS + SAMPLE_SLOT] = v[c];
#else
  barrier();
  for (uint c = 0; c < NSUM; ++c) red_f[c * SLOTS + SAMPLE_SLOT] = v[c];
#endif
  barrier();
  for (uint c = gl_LocalInvocationID.x; c < NSUM; c += gl_WorkGroupSize.x) {
    float s = red_f[c * SLOTS];
    for (uint i = 1; i < SAMPLE_PARTIALS; ++i) s += red_f[c * SLOTS + i];
    red_res[c] = s;
  }
  barrier();
  for (uint c = 0; c < NSUM; ++c) v[c] = red_res[c];
}

// Exclusive prefix sum of v in invocation order; `total` gets the sum over the workgroup
// (the same bits on every invocation). For nonnegative v the prefixes never decrease.
float wg_exclusive_scan(float v, out float total) {
#ifdef USE_SUBGROUP
  float excl = subgroupExclusiveAdd(v);
  float part = subgroupAdd(v);
  if (SLOTS == 1) {
    total = part;
    return excl;
  }
  barrier();
  if (subgroupElect()) red_f[SAMPLE_SLOT] = part;
#else
  float excl = 0.0;
  barrier();
  red_f[SAMPLE_SLOT] = v;
#endif
  barrier();
  // Every invocation adds the slots from 0 up in the same order: its base on the way, the
  // total at the end, so the totals agree bit for bit.
  float base = 0.0;
  for (uint i = 0; i < SAMPLE_SLOT; ++i) base += red_f[i];
  float t = base;
  for (uint i = SAMPLE_SLOT; i < SAMPLE_PARTIALS; ++i) t += red_f[i];
  total = t;
  return base + excl;
}
