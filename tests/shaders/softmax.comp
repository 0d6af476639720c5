#version 450
#extension GL_GOOGLE_include_directive : require
// Row softmax: y = exp(s*x - max) / sum(exp(s*x - max)) over rows of COLS floats (up to a
// vocabulary wide). One workgroup per row, two passes: the first keeps a running maximum
// and a sum rescaled whenever the maximum grows (online softmax), so the row is read twice
// rather than three times; the second writes the normalized values. Each invocation touches
// only its own elements, so y may alias x.
//! variant subgroup USE_SUBGROUP
//! variant shared
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;
layout(constant_id = 2) const float SCALE = 1.0;

#include "common/reduce.glsl"

layout(push_constant) uniform Push { uint rows; } pc;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

// A finite floor rather than -inf: exp(floor - v) is 0 without inf - inf = NaN, and -inf
// inputs (masked logits) still contribute exactly 0.
const float LOWEST = -3.4028234663852886e38;

void main() {
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // whole workgroup leaves together
  uint lid = gl_LocalInvocationID.x;
  uint base = row * COLS;

  // Running max m and sum s of exp(v - m), the sum compensated (Kahan): on a CPU device an
  // invocation adds thousands of terms of a vocabulary-wide row, which plain f32 adds would
  // leave ~1e-5 off. `precise` keeps the compiler from simplifying the compensation away.
  float m = LOWEST;
  precise float s = 0.0, comp = 0.0;
  for (uint c = lid; c < COLS; c += gl_WorkGroupSize.x) {
    float v = SCALE * x[base + c];
    float e = 1.0;
    if (v > m) {
      float f = exp(m - v);  // rescale what was summed against the old maximum
      s *= f;
      comp *= f;
      m = v;
    } else {
      e = exp(v - m);
    }
    precise float term = e - comp;
    precise float sum = s + term;
    comp = (sum - s) - term;
    s = sum;
  }
  float row_max = wg_max(m);
  float total = wg_sum(s * exp(m - row_max));
  float inv = 1.0 / total;

  for (uint c = lid; c < COLS; c += gl_WorkGroupSize.x) y[base + c] = exp(SCALE * x[base + c] - row_max) * inv;
}
