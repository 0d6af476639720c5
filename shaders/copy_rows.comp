#version 450
// Copies `rows` rows of `cols` floats from src (starting at row SRC_ROW, a push constant)
// to dst. Used to pick the last position's hidden state before the LM head, where a
// binding offset would have to meet the device's offset alignment.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push { uint src_row; uint rows; } pc;

// Each invocation copies every (invocations in the grid)-th element from its own on: one
// element on GPUs, whose grids cover the rows; many on CPU devices, which get a few
// workgroups (engine/ops/copy_rows.cpp).
void main() {
  uint n = pc.rows * COLS, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) dst[i] = src[pc.src_row * COLS + i];
}
