// Mat-vec kernel (decode, T == 1; also any T, one token per workgroup row): a workgroup
// computes R consecutive outputs of token gl_WorkGroupID.y. Its invocations split the
// input dimension in uvec4 words of W (adjacent invocations read adjacent words, so a GPU
// coalesces the loads), each keeping R partial sums so one load of x serves R rows; the
// partial sums are then reduced across the workgroup (subgroupAdd, or shared memory).
layout(constant_id = 7) const uint R = 4;  // outputs per workgroup

shared float partial[R * gl_WorkGroupSize.x];

void main() {
  read_push_constants();
  const uint LOCAL = gl_WorkGroupSize.x;
  uint lane = gl_LocalInvocationID.x;
  uint t = gl_WorkGroupID.y;
  uint row0 = gl_WorkGroupID.x * R;
  uint xrow = t * K;

  // Rows past the end are clamped (read a valid row, result dropped) so the loop has no branch.
  uint wrow[R];
  float acc[R];
  for (uint i = 0u; i < R; ++i) {
    wrow[i] = min(row0 + i, ROWS - 1u) * W_STRIDE;
    acc[i] = 0.0;
  }

  for (uint q = lane; q < K_FULL; q += LOCAL) {
    vec4 x_lo = load_x4(xrow + q * KW);
    vec4 x_hi = KW == 8u ? load_x4(xrow + q * KW + 4u) : vec4(0.0);
    for (uint i = 0u; i < R; ++i) acc[i] = word_dot(load_w(wrow[i] + q), x_lo, x_hi, acc[i]);
  }
  // The partial last word, outside the loop so the loop body stays branch-free.
  if (K_TAIL > 0u && lane == K_FULL % LOCAL) {
    vec4 x_lo, x_hi;
    load_x_word(xrow, K_FULL, x_lo, x_hi);
    for (uint i = 0u; i < R; ++i) acc[i] = word_dot(load_w(wrow[i] + K_FULL), x_lo, x_hi, acc[i]);
  }

#ifdef SUBGROUP
  // Sum within each subgroup, then across subgroups through shared memory.
  uint nsg = gl_NumSubgroups;
  for (uint i = 0u; i < R; ++i) {
    float s = subgroupAdd(acc[i]);
    if (subgroupElect()) partial[i * LOCAL + gl_SubgroupID] = s;
  }
  barrier();
  for (uint i = lane; i < R; i += LOCAL) {
    float s = 0.0;
    for (uint g = 0u; g < nsg; ++g) s += partial[i * LOCAL + g];
    if (row0 + i < ROWS) store_y(t, row0 + i, s);
  }
#else
  // Tree reduction in shared memory (LOCAL is a power of two).
  for (uint i = 0u; i < R; ++i) partial[i * LOCAL + lane] = acc[i];
  barrier();
  for (uint s = LOCAL / 2u; s > 0u; s >>= 1) {
    if (lane < s)
      for (uint i = 0u; i < R; ++i) partial[i * LOCAL + lane] += partial[i * LOCAL + lane + s];
    barrier();
  }
  for (uint i = lane; i < R; i += LOCAL)
    if (row0 + i < ROWS) store_y(t, row0 + i, partial[i * LOCAL]);
#endif
}
