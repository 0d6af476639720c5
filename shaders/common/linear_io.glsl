// Shared part of the linear-layer kernels (shaders/linear.comp): dimensions, bindings,
// weight decoding and the fused epilogue. The host (engine/ops/linear.cpp) binds views
// already offset to the first token and first output column of the dispatch, so the
// kernels index from 0.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint K = 1;          // inputs per token (W.cols)
layout(constant_id = 2) const uint W_STRIDE = 1;   // uvec4 words per stored W row
layout(constant_id = 3) const uint DT = 0;         // weight dtype: 0 f32, 1 f16, 2 bf16 (engine/dtype.hpp)
layout(constant_id = 4) const uint ACT = 0;        // engine/ops/activation.hpp
layout(constant_id = 5) const bool HAS_BIAS = false;
layout(constant_id = 6) const uint RES = 0;        // residual: 0 none, 1 from binding r, 2 in place (r is y)
// constant_id 7.. are the kernel's tile sizes.

#include "common/activation.glsl"
#include "common/f16_scaled.glsl"

// Sizes that vary between the dispatches of one layer (token blocks, weight chunks) are
// push constants, so those dispatches share one pipeline.
layout(push_constant) uniform Push {
  uint T;         // tokens (rows of x and y) in this dispatch
  uint rows;      // W rows (outputs) this dispatch computes
  uint y_stride;  // floats per token row of y and r (W.rows)
#ifdef TEXEL
  uint w_base;    // first uvec4 texel of this dispatch's rows in the (whole-chunk) texel view
#endif
#ifdef X_TEXEL
  uint x_base;    // first uvec4 texel of x in its buffer's texel view
#endif
} pc;

// The push constants as private copies, which every kernel's main() fills first
// (read_push_constants): on lavapipe a push-constant read inside a loop or a branch is a
// gather over the lanes (~25 instructions), and the fetch helpers below run in the
// kernels' innermost loops (bench/PERFORMANCE.md, "What limits it").
uint pc_T, pc_rows, pc_y_stride, pc_w_base, pc_x_base;
void read_push_constants() {
  pc_T = pc.T;
  pc_rows = pc.rows;
  pc_y_stride = pc.y_stride;
#ifdef TEXEL
  pc_w_base = pc.w_base;
#endif
#ifdef X_TEXEL
  pc_x_base = pc.x_base;
#endif
}
#define TOKENS pc_T
#define ROWS pc_rows
#define Y_STRIDE pc_y_stride

// f16 weights in the kernels for CPU devices (those reading x through a texel view) are
// decoded with integer operations into f32 bits worth value * 2^-112 (see decode()), and x
// is read times 2^56: products are w * x * 2^-56, far from f32's subnormal range (x86 takes
// a microcode assist for each vector op with a subnormal operand), and the result is scaled
// back by 2^56. Scaling by powers of two is exact: results are bit for bit those of
// unscaled operands.
#if defined(X_TEXEL)
const bool F16_BITS = DT == 1u;
#else
const bool F16_BITS = false;
#endif
const float X_SCALE = F16_BITS ? 72057594037927936.0 : 1.0;  // 2^56
const float Y_UNSCALE = X_SCALE;

#if defined(X_TEXEL)
// x through a texel view of its whole buffer (the host ensures 16-byte aligned rows):
// lavapipe vectorises the fetch, where a storage-buffer load is a scalar loop over the lanes.
layout(binding = 0) uniform utextureBuffer x_tex;
vec4 load_x4(uint e) { return uintBitsToFloat(texelFetch(x_tex, int(pc_x_base + (e >> 2)))) * X_SCALE; }
float load_x1(uint e) { return load_x4(e & ~3u)[e & 3u]; }
#elif defined(X_SCALAR)
// K is not a multiple of 4, so token rows of x are not 16-byte aligned: scalar loads.
layout(std430, binding = 0) readonly buffer XBuf { float xs[]; };
vec4 load_x4(uint e) { return vec4(xs[e], xs[e + 1], xs[e + 2], xs[e + 3]); }
float load_x1(uint e) { return xs[e]; }
#else
// One vec4 load per 4 inputs: on lavapipe every storage-buffer load in a loop becomes a
// loop over the lanes (plus a bounds check per component), so one wide load pays that
// per-lane overhead once instead of four times.
layout(std430, binding = 0) readonly buffer XBuf { vec4 xv[]; };
vec4 load_x4(uint e) { return xv[e >> 2]; }  // e is a multiple of 4
float load_x1(uint e) { return xv[e >> 2][e & 3u]; }
#endif

// All dtypes are read as packed uvec4 words (no 16-bit storage feature needed):
// a word holds 4 f32 or 8 f16/bf16 weights.
#ifdef TEXEL
// W as a uniform texel buffer of uvec4: lavapipe vectorises texel fetches across the lanes,
// while a storage-buffer load is a scalar loop over them (bench/PERFORMANCE.md, "What
// limits it").
layout(binding = 1) uniform utextureBuffer w_tex;
uvec4 load_w(uint i) { return texelFetch(w_tex, int(pc_w_base + i)); }
#else
layout(std430, binding = 1) readonly buffer WBuf { uvec4 w[]; };
uvec4 load_w(uint i) { return w[i]; }
#endif
layout(std430, binding = 2) readonly buffer BiasBuf { float bias[]; };
layout(std430, binding = 3) readonly buffer RBuf { float r[]; };
#ifdef LN_AFTER
layout(std430, binding = 4) coherent buffer YBuf { float y[]; };  // read back by the last workgroup
#else
layout(std430, binding = 4) buffer YBuf { float y[]; };
#endif
// f16 weights: each row's 2^-shift that undoes its storage scaling (engine/f16_rows.hpp).
layout(std430, binding = 5) readonly buffer RowScale { float row_scale[]; };

const uint KW = DT == 0u ? 4u : 8u;        // weights per uvec4 word
const uint K_FULL = K / KW;                 // words whose inputs are all < K
const uint K_TAIL = K - K_FULL * KW;        // inputs in the last, partial word
const uint K_WORDS = K_FULL + (K_TAIL > 0u ? 1u : 0u);

vec4 bf16_lo(uvec4 p) { return uintBitsToFloat(p << 16); }
vec4 bf16_hi(uvec4 p) { return uintBitsToFloat(p & 0xffff0000u); }

// The weights of one word as floats: lo = elements 0..3, hi = 4..7 (hi unused for f32).
// Each 32-bit word holds elements 2i (low half) and 2i+1 (high half).
void decode(uvec4 p, out vec4 lo, out vec4 hi) {
  if (F16_BITS) {
    // Each half's value * 2^-112 (common/f16_scaled.glsl); the row scaling leaves subnormal
    // halves only in rows holding values >= 64. Faster on lavapipe than unpackHalf2x16,
    // whose F16C conversion competes with the texel fetches for the shuffle port
    // (bench/PERFORMANCE.md, "What limits it").
    decode_f16_scaled(p, lo, hi);
  } else if (DT == 1u) {
    lo = vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y));
    hi = vec4(unpackHalf2x16(p.z), unpackHalf2x16(p.w));
  } else if (DT == 2u) {
    vec4 a = bf16_lo(p), b = bf16_hi(p);
    lo = vec4(a.x, b.x, a.y, b.y);
    hi = vec4(a.z, b.z, a.w, b.w);
  } else {
    lo = uintBitsToFloat(p);
    hi = vec4(0.0);
  }
}

// acc + dot(a, b) as a chain of fma: without fast-math, lavapipe's LLVM would not fuse the
// multiplies and adds of dot().
float fma4(vec4 a, vec4 b, float acc) {
  return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, acc))));
}

// acc + the dot product of one word of W with the matching inputs (x_hi unused for f32).
float word_dot(uvec4 p, vec4 x_lo, vec4 x_hi, float acc) {
  vec4 lo, hi;
  decode(p, lo, hi);
  acc = fma4(lo, x_lo, acc);
  if (KW == 8u) acc = fma4(hi, x_hi, acc);
  return acc;
}

// Inputs of word q of token row `row` (an element offset into x); the tail word reads
// only inputs < K, the rest are 0 (their weights are the zero padding of the row).
void load_x_word(uint row, uint q, out vec4 x_lo, out vec4 x_hi) {
  uint k = q * KW;
  if (q < K_FULL) {
    x_lo = load_x4(row + k);
    x_hi = KW == 8u ? load_x4(row + k + 4u) : vec4(0.0);
  } else {
    float v[8];
    for (uint i = 0u; i < 8u; ++i) v[i] = (i < K_TAIL) ? load_x1(row + k + min(i, K_TAIL - 1u)) : 0.0;
    x_lo = vec4(v[0], v[1], v[2], v[3]);
    x_hi = vec4(v[4], v[5], v[6], v[7]);
  }
}

// Inputs e .. e + 3 (e a multiple of 4) of token row `row`, those at K or past it 0 (the
// CPU GEMMs' quads of the partial last word; common/linear_gemm_words.glsl).
vec4 load_x4_in_row(uint row, uint e) {
  if (K_TAIL == 0u || e + 4u <= K) return load_x4(row + e);
  float v[4];
  for (uint i = 0u; i < 4u; ++i) v[i] = e + i < K ? load_x1(row + min(e + i, K - 1u)) : 0.0;
  return vec4(v[0], v[1], v[2], v[3]);
}

// What row o's accumulator is multiplied by and then added to before its activation: the
// storage scalings undone (rows stored scaled, 16-bit weights with a unit exponent bias),
// then the bias. Loaded once per output where a register tile serves several tokens.
struct OutputAffine {
  float row_scale;
  float bias;
};
float row_scale_of(uint o) { return DT == 1u ? row_scale[o] : 1.0; }
OutputAffine output_affine(uint o) { return OutputAffine(row_scale_of(o), HAS_BIAS ? bias[o] : 0.0); }

// The true dot product of a row from the kernel's accumulator: storage scalings undone.
float unscaled(OutputAffine a, float acc) {
  float v = acc;
  if (F16_BITS) v *= Y_UNSCALE;
  if (DT == 1u) v *= a.row_scale;
  return v;
}
float unscaled(uint o, float acc) { return unscaled(OutputAffine(row_scale_of(o), 0.0), acc); }

// v + bias: the value before the activation.
float biased(OutputAffine a, float v) { return HAS_BIAS ? v + a.bias : v; }

// y[t][o] = (residual) + act(v) for v already unscaled and biased; returns the value stored.
float activate_and_store(uint t, uint o, float v) {
  v = activate(v, ACT);
  uint i = t * Y_STRIDE + o;
  if (RES == 1u) v += r[i];
  else if (RES == 2u) v += y[i];
  y[i] = v;
  return v;
}

// y[t][o] = (residual) + act(v + bias[o]) for a dot product v already unscaled; returns
// the value stored.
float finish_y(uint t, uint o, float v) { return activate_and_store(t, o, HAS_BIAS ? v + bias[o] : v); }

// y[t][o] = (residual) + act(acc + bias[o]); returns the value stored.
float store_y(uint t, uint o, float acc) { return finish_y(t, o, unscaled(o, acc)); }
