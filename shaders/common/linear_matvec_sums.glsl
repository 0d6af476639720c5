// The sums of the split-K mat-vecs (common/linear_matvec.glsl and, over Q8_0 / Q4_0 blocks,
// common/linear_matvec_q.glsl): each invocation's NSUM partial sums (the kernel defines
// NSUM) meet in shared memory; total(i) is sum i of the whole workgroup afterwards.
const uint LOCAL = gl_WorkGroupSize.x;
shared float partial[NSUM * LOCAL];

float total(uint i) {
#ifdef SUBGROUP
  float s = 0.0;
  for (uint g = 0u; g < gl_NumSubgroups; ++g) s += partial[i * LOCAL + g];
  return s;
#else
  return partial[i * LOCAL];
#endif
}

void reduce_sums(float acc[NSUM], uint lane) {
#ifdef SUBGROUP
  // Sum within each subgroup, then across subgroups through shared memory.
  for (uint i = 0u; i < NSUM; ++i) {
    float s = subgroupAdd(acc[i]);
    if (subgroupElect()) partial[i * LOCAL + gl_SubgroupID] = s;
  }
  barrier();
#else
  // Tree reduction in shared memory (LOCAL is a power of two).
  for (uint i = 0u; i < NSUM; ++i) partial[i * LOCAL + lane] = acc[i];
  barrier();
  for (uint s = LOCAL / 2u; s > 0u; s >>= 1) {
    if (lane < s)
      for (uint i = 0u; i < NSUM; ++i) partial[i * LOCAL + lane] += partial[i * LOCAL + lane + s];
    barrier();
  }
#endif
}
