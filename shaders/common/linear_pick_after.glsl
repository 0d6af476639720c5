// PICK_AFTER (decode on CPU devices, shaders/common/linear_matvec_rows.glsl): the greedy
// pick of the linear's output row (one token, all ROWS outputs, this single dispatch), i.e.
// what shaders/sample.comp does at temperature 0: ids[0] = the lowest index of the largest
// output, and the step advances (pos += 1, rng += 1). Each invocation keeps the best of the
// outputs it stores, each workgroup leaves the best of its invocations in pick_partials, and
// the workgroup that finishes last picks among those. The sampler's own dispatch is one
// workgroup, so one CPU thread, reading all the logits back after the LM head, plus the
// cost of a dispatch: picking here saves both, which shows most on small models
// (bench/PERFORMANCE.md, "What a dispatch costs").
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "common/order_key.glsl"

#define STEP_BINDING 7
#include "common/step.glsl"
layout(std430, binding = 6) writeonly buffer Ids { uint ids[]; };
// Per workgroup: (order key of its largest output, ~the lowest index holding it).
layout(std430, binding = 8) coherent buffer PickPartials { uvec2 pick_partials[]; };
#include "common/last_arrival.glsl"

// This invocation's best output so far, as (order key, ~index): the larger pair is the
// larger output, then the lower index. (0, 0) is below every output: order_key() is 0
// only for a NaN, which the sampler does not support either.
uint pick_key = 0u, pick_nidx = 0u;

void pick_offer(uint o, float v) {
  uint k = order_key(v);
  if (k > pick_key || (k == pick_key && ~o > pick_nidx)) {
    pick_key = k;
    pick_nidx = ~o;
  }
}

// The best pair over the subgroup (the workgroup is one subgroup).
uvec2 subgroup_best(uint k, uint n) {
  uint best_k = subgroupMax(k);
  return uvec2(best_k, subgroupMax(k == best_k ? n : 0u));
}

void pick_if_last(uint lane) {
  uvec2 mine = subgroup_best(pick_key, pick_nidx);
  if (lane == 0u) pick_partials[gl_WorkGroupID.x] = mine;
  if (!last_to_arrive(lane)) return;

  uint k = 0u, n = 0u;
  for (uint g = lane; g < gl_NumWorkGroups.x; g += LOCAL) {
    uvec2 p = pick_partials[g];
    if (p.x > k || (p.x == k && p.y > n)) {
      k = p.x;
      n = p.y;
    }
  }
  uvec2 best = subgroup_best(k, n);
  if (lane == 0u) {
    ids[0] = ~best.y;
    step_pos = step_pos + 1u;
    step_rng = step_rng + 1u;
    arrival_reset();
  }
}
