#version 450
// Copies `rows` rows of `cols` floats from src (starting at row SRC_ROW, a push constant)
// to dst. Used to pick the last position's hidden state before the LM head, and a batched
// decode step's rows of logits to their sequences, where a binding offset would have to
// meet the device's offset alignment.
// Each invocation copies every (invocations in the grid)-th unit from its own on: one
// element on GPUs, whose grids cover the rows; many on CPU devices, which get a few
// workgroups and copy vec4 units (engine/ops/copy_rows.cpp; only where d % 4 == 0).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;
// vec4 units through bindings 2 and 3, the same views as 0 and 1: on lavapipe every
// storage access is a per-lane loop, so a vec4 is a quarter of the iterations of floats.
layout(constant_id = 2) const bool VECTOR = false;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(std430, binding = 2) readonly buffer SrcV { vec4 srcv[]; };
layout(std430, binding = 3) writeonly buffer DstV { vec4 dstv[]; };
// dst_row: the first row of dst written (a batched step's row b, whose offset as a view's
// would not meet the device's binding alignment where the rows are not whole vec4s).
layout(push_constant) uniform Push { uint src_row; uint rows; uint dst_row; } pc;

void main() {
  const uint n = pc.rows * COLS, s = pc.src_row * COLS, d = pc.dst_row * COLS;
  const uint id = gl_GlobalInvocationID.x, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint scalar_from = 0;
  if (VECTOR) {
    // dst's vec4 k is src's floats s + 4k .. s + 4k + 3: src's vec4 a = s / 4 + k shifted by
    // s % 4 into the next one. The last vec4 and the tail (n % 4 floats) go as floats
    // below, so that no src vec4 read passes the view's end.
    const uint nv = n / 4u, a0 = s / 4u, sh = s % 4u;
    const uint full = nv > 0u ? nv - 1u : 0u;
    for (uint k = id; k < full; k += stride) {
      vec4 lo = srcv[a0 + k], hi = srcv[a0 + k + 1u];
      dstv[d / 4u + k] =
          sh == 0u ? lo : sh == 1u ? vec4(lo.yzw, hi.x) : sh == 2u ? vec4(lo.zw, hi.xy) : vec4(lo.w, hi.xyz);
    }
    scalar_from = 4u * full;
  }
  for (uint i = scalar_from + id; i < n; i += stride) dst[d + i] = src[s + i];
}
