// Mat-vec kernel (decode, T == 1; also any T, TB tokens per workgroup row): a workgroup
// computes R consecutive outputs of TB tokens. Its invocations split the input dimension
// in uvec4 words of W (adjacent invocations read adjacent words, so a GPU coalesces the
// loads), each keeping R partial sums per token so one load of x serves R rows and one
// load of W serves TB tokens; each token's partial sums are then reduced across the
// workgroup (subgroupAdd, or shared memory) as a lone token's are.
layout(constant_id = 7) const uint R = 4;   // outputs per workgroup
layout(constant_id = 8) const uint TB = 1;  // tokens per workgroup

#ifdef LN_BEFORE
// The LayerNorm of x folded in (pre-LN blocks on GPUs, one token):
//   W LN(x) + b = rstd * (W (gamma * x) - mean * W gamma) + (W beta + b),
// with W gamma per row in binding 7 and W beta + b as the bias, both made once by the host
// (engine/ops/linear.hpp, NormBefore). The kernel computes W (gamma * x), and from the
// loads of x it does anyway the sums of x and x^2 that give mean and rstd: the LayerNorm
// needs no dispatch of its own (on a GPU each dispatch behind a barrier costs ~5 us) and x
// is read once. The variance is E[x^2] - mean^2, which would cancel only for a mean far
// above the spread (not so in GPT residual streams; the model tests hold it to PyTorch).
// The host takes this variant only for K a multiple of the weights per word (no tail).
layout(constant_id = 9) const float LN_EPS = 1e-5;
layout(std430, binding = 6) readonly buffer GammaIn { vec4 gamma_in[]; };
layout(std430, binding = 7) readonly buffer RowGamma { float row_gamma[]; };
const uint NSUM = R + 2u;  // the rows' sums, then the sums of x and of x^2
#else
const uint NSUM = R;
#endif

// Word q of every row into the sums: the rows' dot products with x (and, the LayerNorm
// folded in, the sums of x and x^2).
void accumulate(uint xrow, uint q, uvec4 words[R], inout float acc[NSUM]) {
  vec4 x_lo = load_x4(xrow + q * KW);
  vec4 x_hi = KW == 8u ? load_x4(xrow + q * KW + 4u) : vec4(0.0);
#ifdef LN_BEFORE
  acc[R] += (x_lo.x + x_lo.y) + (x_lo.z + x_lo.w) + ((x_hi.x + x_hi.y) + (x_hi.z + x_hi.w));
  acc[R + 1u] += dot(x_lo, x_lo) + dot(x_hi, x_hi);
  x_lo *= gamma_in[q * (KW / 4u)];
  if (KW == 8u) x_hi *= gamma_in[q * 2u + 1u];
#endif
  for (uint i = 0u; i < R; ++i) acc[i] = word_dot(words[i], x_lo, x_hi, acc[i]);
}

#include "common/linear_matvec_sums.glsl"

// The invocation's words of every row, LOCAL apart (adjacent invocations read adjacent
// words), for each token of the workgroup (xrows[j]: token j's first input).
void lane_sums(uint xrows[TB], uint wrow[R], uint lane, inout float acc[TB][NSUM]) {
  for (uint q = lane; q < K_FULL; q += LOCAL) {
    uvec4 words[R];
    for (uint i = 0u; i < R; ++i) words[i] = load_w(wrow[i] + q);
    for (uint j = 0u; j < TB; ++j) accumulate(xrows[j], q, words, acc[j]);
  }
  // The partial last word, outside the loop so the loop body stays branch-free.
  if (K_TAIL > 0u && lane == K_FULL % LOCAL) {
    for (uint j = 0u; j < TB; ++j) {
      vec4 x_lo, x_hi;
      load_x_word(xrows[j], K_FULL, x_lo, x_hi);
      for (uint i = 0u; i < R; ++i) acc[j][i] = word_dot(load_w(wrow[i] + K_FULL), x_lo, x_hi, acc[j][i]);
    }
  }
}

void put_sum(uint t, uint row, uint i) {
#ifdef LN_BEFORE
  float mean = total(R) / float(K);
  float rstd = 1.0 / sqrt(max(total(R + 1u) / float(K) - mean * mean, 0.0) + LN_EPS);
  finish_y(t, row, rstd * (unscaled(row, total(i)) - mean * row_gamma[row]));
#else
  store_y(t, row, total(i));
#endif
}

#include "common/linear_matvec_main.glsl"
