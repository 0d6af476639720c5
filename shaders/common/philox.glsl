// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based RNG of the sampler. A draw is a pure function of (key, counter),
// so replaying a recorded graph with the same step counter repeats the same draw on any
// device, and the CPU reference (tests/reference/sample.cpp) computes the same bits.

uvec4 philox4x32_10(uvec4 ctr, uvec2 key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key += uvec2(0x9E3779B9u, 0xBB67AE85u);  // Weyl key schedule
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, ctr.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, ctr.z, hi1, lo1);
    ctr = uvec4(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
  }
  return ctr;
}

// The sampler's uniform draw in [0, 1) for step counter `counter` under `seed`: the top 24
// bits of the first output word, so the float is exact (k / 2^24) and equals the CPU's.
float philox_uniform(uvec2 seed, uint counter) {
  return float(philox4x32_10(uvec4(counter, 0u, 0u, 0u), seed).x >> 8) * (1.0 / 16777216.0);
}
