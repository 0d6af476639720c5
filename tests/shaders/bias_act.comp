#version 450
#extension GL_GOOGLE_include_directive : require
// y = act(x + bias[col]) over a rows x cols float matrix. The grid's x dimension covers the
// columns and its y dimension strides over the rows, so any row count fits in one dispatch
// and no invocation needs a division to find its column. y may alias x.
// VEC4 (cols a multiple of 4): each invocation moves 4 floats per access; COLS then counts
// vec4s.
//! variant scalar
//! variant vec4 VEC4
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;
layout(constant_id = 2) const uint ACT = 0;

#include "common/activation.glsl"

#ifdef VEC4
#define VT vec4
VT act(vec4 v) { return vec4(activate(v.x, ACT), activate(v.y, ACT), activate(v.z, ACT), activate(v.w, ACT)); }
#else
#define VT float
VT act(float v) { return activate(v, ACT); }
#endif

layout(push_constant) uniform Push { uint rows; } pc;

layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) readonly buffer Bias { VT bias[]; };
layout(std430, binding = 2) writeonly buffer Y { VT y[]; };

void main() {
  uint col = gl_GlobalInvocationID.x;
  if (col >= COLS) return;
  VT b = bias[col];
  for (uint row = gl_WorkGroupID.y; row < pc.rows; row += gl_NumWorkGroups.y) {
    uint i = row * COLS + col;
    y[i] = act(x[i] + b);
  }
}
