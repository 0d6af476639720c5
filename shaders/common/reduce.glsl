// Workgroup-wide reductions: every invocation passes a value and gets back the sum (or max)
// over the whole workgroup. Include after `layout(local_size_x_id = 0) in;` (the shared
// scratch array is sized by the workgroup size). Define USE_SUBGROUP to reduce with subgroup
// arithmetic (needs caps.subgroup_arithmetic); without it a shared-memory tree does the work.
//
// Rules: 1D workgroups only (the tree indexes by gl_LocalInvocationID.x). Call from
// workgroup-uniform control flow (every invocation, same number of calls:
// the functions contain barriers). The shared tree takes any workgroup size, power of two
// or not; the subgroup path needs a whole number of subgroups (with a partial last
// subgroup, e.g. 20 invocations in subgroups of 8, lavapipe returned wrong sums). The
// scratch array is shared between calls; each call begins with a barrier so that a call
// never overwrites values the previous one is still reading.
//
// On a device whose subgroup covers the whole workgroup (lavapipe with the workgroup size
// set to caps.subgroup_size) the subgroup path is a single instruction with no barrier.
// Mind lavapipe's loop limit (engine/ops/row_reduce.hpp): an invocation's loops end after
// 65535 iterations in total, so a row loop must leave each invocation fewer than that.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

shared float reduce_scratch[gl_WorkGroupSize.x];

#ifdef USE_SUBGROUP

float wg_sum(float v) {
  v = subgroupAdd(v);
  if (gl_NumSubgroups == 1) return v;
  barrier();
  if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
  barrier();
  // Every invocation adds the partials in the same order, so all get the same bits.
  float s = reduce_scratch[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) s += reduce_scratch[i];
  return s;
}

float wg_max(float v) {
  v = subgroupMax(v);
  if (gl_NumSubgroups == 1) return v;
  barrier();
  if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
  barrier();
  float m = reduce_scratch[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) m = max(m, reduce_scratch[i]);
  return m;
}

#else

// Tree over n live values: the upper half (rounded down) folds onto the lower half until one
// is left, so n need not be a power of two.
float wg_sum(float v) {
  uint lid = gl_LocalInvocationID.x;
  barrier();
  reduce_scratch[lid] = v;
  barrier();
  for (uint n = gl_WorkGroupSize.x; n > 1;) {
    uint h = (n + 1) / 2;
    if (lid + h < n) reduce_scratch[lid] += reduce_scratch[lid + h];
    barrier();
    n = h;
  }
  return reduce_scratch[0];
}

float wg_max(float v) {
  uint lid = gl_LocalInvocationID.x;
  barrier();
  reduce_scratch[lid] = v;
  barrier();
  for (uint n = gl_WorkGroupSize.x; n > 1;) {
    uint h = (n + 1) / 2;
    if (lid + h < n) reduce_scratch[lid] = max(reduce_scratch[lid], reduce_scratch[lid + h]);
    barrier();
    n = h;
  }
  return reduce_scratch[0];
}

#endif
