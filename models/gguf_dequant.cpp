#include "models/gguf_dequant.hpp"

#include <cstring>

#include "engine/dtype.hpp"
#include "models/gguf_file.hpp"

namespace gptvk {

namespace {

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Blocks of 32 values: an f16 scale d (and for the _1 types an f16 minimum m) and 4 or 5
// bits per value, the low nibbles holding values 0..15 and the high nibbles 16..31.
void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}
void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = float((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = float((b[2 + j] >> 4) - 8) * d;
  }
}
void q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = float(b[4 + j] & 0x0F) * d + m;
    y[j + 16] = float(b[4 + j] >> 4) * d + m;
  }
}
// Q5: a 32-bit word of fifth bits after the scale(s).
void q5(const uint8_t* b, float* y, bool with_min) {
  const float d = half(b), m = with_min ? half(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int offset = with_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = float(((qs[j] & 0x0F) | h0) - offset) * d + m;
    y[j + 16] = float(((qs[j] >> 4) | h1) - offset) * d + m;
  }
}

// IQ4_NL: blocks of 32 as Q4_0's, each nibble an index into a fixed table of 16 levels
// spaced more closely near zero (ggml's kvalues_iq4nl), where weights cluster.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
void iq4_nl(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4Levels[b[2 + j] & 0x0F]);
    y[j + 16] = d * float(kIq4Levels[b[2 + j] >> 4]);
  }
}

// K-quants: super-blocks of 256 values, an f16 scale d (and a dmin for the types with
// minimums) over small per-sub-block scales.
// Q2_K: scales[16] (a 4-bit scale and a 4-bit minimum per 16 values), qs[64] (2 bits a value:
// each half of 128 values reads its 32 bytes four times, at shifts 0, 2, 4 and 6), d, dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = half(b + 80), dmin = half(b + 82);
  for (int half128 = 0, is = 0; half128 < 2; ++half128, q += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int part = 0; part < 2; ++part, ++is) {
        const float dl = d * float(scales[is] & 0xF), ml = dmin * float(scales[is] >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * part] >> shift) & 3) - ml;
      }
}
// Q3_K: hmask[32] (the third bit of each value: set means +0, clear -4), qs[64] (low 2 bits,
// laid out as Q2_K's), scales[12] (sixteen 6-bit scales biased by 32: low nibbles in bytes
// 0-7, high 2-bit pairs in bytes 8-11), d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = half(b + 108);
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0xF : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = int8_t((low | (high << 4)) - 32);
  }
  uint8_t m = 1;
  for (int half128 = 0, is = 0; half128 < 2; ++half128, q += 32)
    for (int shift = 0; shift < 8; shift += 2, m <<= 1)
      for (int part = 0; part < 2; ++part, ++is) {
        const float dl = d * float(scales[is]);
        for (int l = 0; l < 16; ++l) {
          const int k = l + 16 * part;
          *y++ = dl * float(((q[k] >> shift) & 3) - (hmask[k] & m ? 0 : 4));
        }
      }
}
// IQ4_XS: d, scales_h (2 high bits of each of 8 sub-block scales), scales_l[4] (their low
// nibbles), qs[128]: eight IQ4_NL blocks of 32 under 6-bit scales biased by 32.
void iq4_xs(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint16_t scales_h = uint16_t(b[2] | (b[3] << 8));
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * float(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * float(kIq4Levels[qs[j] & 0xF]);
      y[j + 16] = dl * float(kIq4Levels[qs[j] >> 4]);
    }
  }
}
// Q4_K, Q5_K: eight sub-blocks of 32, each with a 6-bit scale and a 6-bit minimum packed
// into 12 bytes.
void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// Q4_K: d, dmin, scales[12], qs[128]. Q5_K: the same plus qh[32] before qs.
void q45_k(const uint8_t* b, float* y, bool five) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = five ? b + 48 : b + 16;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
    uint8_t sc, m;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * float((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
    q += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}
// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

bool ggml_dequantizable(uint32_t t) {
  switch (t) {
    case ggml::Q8_0: case ggml::Q4_0: case ggml::Q4_1: case ggml::Q5_0: case ggml::Q5_1: case ggml::Q2_K:
    case ggml::Q3_K: case ggml::Q4_K: case ggml::Q5_K: case ggml::Q6_K: case ggml::IQ4_NL: case ggml::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool dequantize_ggml(uint32_t type, const std::byte* src, float* dst, uint64_t n) {
  uint64_t block_values = 0, block_bytes = 0;
  if (!ggml_dequantizable(type) || !ggml::block_layout(type, block_values, block_bytes)) return false;
  const auto* b = reinterpret_cast<const uint8_t*>(src);
  for (uint64_t k = 0; k < n / block_values; ++k, b += block_bytes, dst += block_values) {
    switch (type) {
      case ggml::Q8_0: q8_0(b, dst); break;
      case ggml::Q4_0: q4_0(b, dst); break;
      case ggml::Q4_1: q4_1(b, dst); break;
      case ggml::Q5_0: q5(b, dst, false); break;
      case ggml::Q5_1: q5(b, dst, true); break;
      case ggml::Q4_K: q45_k(b, dst, false); break;
      case ggml::Q5_K: q45_k(b, dst, true); break;
      case ggml::Q6_K: q6_k(b, dst); break;
      case ggml::Q2_K: q2_k(b, dst); break;
      case ggml::Q3_K: q3_k(b, dst); break;
      case ggml::IQ4_NL: iq4_nl(b, dst); break;
      case ggml::IQ4_XS: iq4_xs(b, dst); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace gptvk
