// Order-preserving map of a float to a uint: a < b as floats iff key(a) < key(b). -0 is
// folded onto +0 so equal values always have equal keys. NaN is not supported.
// (The sampler, argmax and the greedy pick after the LM head: common/linear_pick_after.glsl.)
uint order_key(float x) {
  uint b = floatBitsToUint(x);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}
