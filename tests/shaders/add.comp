#version 450
// Residual add: y = a + b, one invocation per element.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint N = 1;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < N) y[i] = a[i] + b[i];
}
