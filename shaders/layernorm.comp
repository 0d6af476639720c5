#version 450
#extension GL_GOOGLE_include_directive : require
// LayerNorm over rows of C floats: y = (x - mean) / sqrt(var + eps) * gamma + beta, with
// the biased variance. Two passes over the row (mean, then the sum of squared deviations)
// so a large mean cannot cancel the variance as E[x^2] - mean^2 would. One workgroup per
// row; each invocation strides over the row and only ever touches its own elements, so y
// may alias the input.
// VEC4 (C a multiple of 4): each invocation moves 4 floats per access, which on lavapipe
// (per-lane gathers) halves the time.
//! variant subgroup USE_SUBGROUP
//! variant shared
//! variant subgroup_vec4 USE_SUBGROUP VEC4
//! variant shared_vec4 VEC4
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint C = 1;
layout(constant_id = 2) const float EPS = 1e-5;

#include "common/reduce.glsl"

#ifdef VEC4
#define VT vec4
#define WIDTH 4u
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#else
#define VT float
#define WIDTH 1u
float hsum(float v) { return v; }
#endif
const uint N = C / WIDTH;  // VT elements per row

layout(push_constant) uniform Push { uint rows; } pc;

layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) readonly buffer Gamma { VT gamma[]; };
layout(std430, binding = 2) readonly buffer Beta { VT beta[]; };
layout(std430, binding = 3) writeonly buffer Y { VT y[]; };
VT load(uint i) { return x[i]; }

void main() {
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // whole workgroup leaves together: no barrier is skipped by part
  uint lid = gl_LocalInvocationID.x;
  uint base = row * N;

  VT s = VT(0.0);
  for (uint c = lid; c < N; c += gl_WorkGroupSize.x) s += load(base + c);
  float mean = wg_sum(hsum(s)) / float(C);

  VT q = VT(0.0);
  for (uint c = lid; c < N; c += gl_WorkGroupSize.x) {
    VT d = load(base + c) - mean;
    q += d * d;
  }
  float rstd = 1.0 / sqrt(wg_sum(hsum(q)) / float(C) + EPS);

  for (uint c = lid; c < N; c += gl_WorkGroupSize.x) y[base + c] = (load(base + c) - mean) * rstd * gamma[c] + beta[c];
}
