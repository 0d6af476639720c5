#version 450
#extension GL_GOOGLE_include_directive : require
// out[0] = the lowest index of the largest of x[0..N): one workgroup, one pass over x. Each
// invocation keeps its largest order key and the lowest index holding it; the workgroup
// takes the largest key, then the lowest index among the invocations that hold it.
//! variant subgroup USE_SUBGROUP
//! variant shared
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint N = 1;
layout(constant_id = 2) const uint SLOTS = 1;  // see common/sample_reduce.glsl

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { uint out_index[]; };

#include "common/sample_reduce.glsl"

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint kmax = 0u, nidx = 0u;  // key 0 is below every non-NaN float
  for (uint i = lid; i < N; i += gl_WorkGroupSize.x) {
    uint k = order_key(x[i]);
    if (k > kmax || i == lid) {  // strictly larger: the lowest index wins ties
      kmax = k;
      nidx = ~i;
    }
  }
  uint wg_kmax = wg_max_u(kmax);
  uint index = ~wg_max_u(kmax == wg_kmax ? nidx : 0u);
  if (lid == 0u) out_index[0] = index;
}
