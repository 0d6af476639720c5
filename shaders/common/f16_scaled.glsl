// Eight f16 values packed in a uvec4 (each 32-bit word holds elements 2i in its low half and
// 2i + 1 in its high half), decoded with integer operations for CPU devices: sign to bit 31,
// exponent and mantissa to bits 27..13, giving f32 bits worth value * 2^-112, exact for
// every half (a subnormal half becomes an f32 subnormal: right, but slow on x86). Two or
// three integer ops where unpackHalf2x16 costs lavapipe vpmovdw + vcvtph2ps, which compete
// with its texel fetches for the CPU's shuffle port. The caller undoes the 2^-112 by scaling
// whatever meets the values by F16_SCALED_UNSCALE (powers of two: exact).
// lo = elements 0..3, hi = elements 4..7.
const float F16_SCALED_UNSCALE = 5192296858534827628530496329220096.0;  // 2^112
void decode_f16_scaled(uvec4 p, out vec4 lo, out vec4 hi) {
  vec4 a = uintBitsToFloat(uvec4(ivec4(p << 16) >> 3) & 0x8FFFE000u);  // elements 0, 2, 4, 6
  vec4 b = uintBitsToFloat(uvec4(ivec4(p) >> 3) & 0x8FFFE000u);        // elements 1, 3, 5, 7
  lo = vec4(a.x, b.x, a.y, b.y);
  hi = vec4(a.z, b.z, a.w, b.w);
}
