// Register-blocked GEMM for CPU devices with subgroup operations. On lavapipe (Mesa 22)
// every storage-buffer load inside a loop is a loop over the 8 lanes with a bounds check
// per component (~40 instructions per lane for a vec4), so loads, not FMAs, bound the
// GEMM. Here the workgroup is one subgroup; each invocation owns TN outputs (its own rows
// of W) and computes them for all TM = XT * LOCAL tokens of the workgroup: invocation c
// loads the inputs of tokens c, c + LOCAL, ... once, and subgroupShuffle with a constant
// index (one vpermd on lavapipe) hands them to the others, instead of every invocation
// loading every token's inputs itself.
// The including shader supplies the weights (shaders/linear.comp: f32 / f16 / bf16 words,
// common/linear_gemm_words.glsl; shaders/linear_q.comp: Q8_0 / Q4_0 blocks,
// common/linear_quant.glsl): a row is W_BLOCKS blocks of W_PARTS parts, each part loaded
// once per row (w_load) and used as W_QUADS groups of 4 weights (w_quad), each of which
// serves all TM tokens. Each output's sum runs over its inputs in order, one fma4 per quad:
// over float words that is the row mat-vec's order (common/linear_matvec_rows.glsl), which
// batched decode relies on (tests/test_linear_rows_batch.cpp). Over Q8_0 / Q4_0 blocks
// (W_BLOCK_SUMS) the quads are unscaled and summed per block from 0, each block's sum then
// scaled into the output, as common/linear_matvec_qrows.glsl sums a row.
layout(constant_id = 7) const uint XT = 1;  // tokens loaded per invocation: TM = XT * LOCAL
layout(constant_id = 8) const uint TN = 4;  // outputs per invocation

const uint LOCAL = gl_WorkGroupSize.x;  // == gl_SubgroupSize (the host makes it so)
const uint TM = XT * LOCAL;

#include "common/linear_gemm_tile.glsl"

// Where the quads go: into the outputs (float words), or into their block's sums.
#ifdef W_BLOCK_SUMS
#define W_QUAD w_quad_unscaled
#define QUAD_SUM sum
#else
#define W_QUAD w_quad
#define QUAD_SUM acc
#endif

// Tokens c, c + LOCAL, ...: the inputs of quad h from invocation c, times each row's
// weights of that quad. A macro, so that c is a constant.
#define TOKEN(c)                                                                                \
  if (c < LOCAL) {                                                                              \
    for (uint s = 0u; s < XT; ++s) {                                                            \
      vec4 a = subgroupShuffle(xp[h][s], c);                                                    \
      for (uint j = 0u; j < TN; ++j) QUAD_SUM[s * LOCAL + c][j] = fma4(wq[j], a, QUAD_SUM[s * LOCAL + c][j]); \
    }                                                                                           \
  }

void main() {
  read_push_constants();
  uint lane = gl_SubgroupInvocationID;
  uint t0 = gl_WorkGroupID.x * TM;
  uint o0 = gl_WorkGroupID.y * (LOCAL * TN) + lane * TN;

  uint xr[XT];
  uint wr[TN];
  for (uint s = 0u; s < XT; ++s) xr[s] = min(t0 + s * LOCAL + lane, TOKENS - 1u) * K;
  float acc[TM][TN];
  start_tile(o0, wr, acc);

  for (uint b = 0u; b < W_BLOCKS; ++b) {
#ifdef W_BLOCK_SUMS
    float sum[TM][TN];
    for (uint i = 0u; i < TM; ++i)
      for (uint j = 0u; j < TN; ++j) sum[i][j] = 0.0;
#endif
    WPart wp[TN];
    [[unroll]] for (uint part = 0u; part < W_PARTS; ++part) {
      // The part's inputs before its weights (each quad's inputs loaded at the quad ran
      // slower: bench/PERFORMANCE.md, prefill).
      vec4 xp[W_QUADS][XT];
      [[unroll]] for (uint h = 0u; h < W_QUADS; ++h)
        for (uint s = 0u; s < XT; ++s) xp[h][s] = load_x4_in_row(xr[s], ((b * W_PARTS + part) * W_QUADS + h) * 4u);
      for (uint j = 0u; j < TN; ++j) w_load(wp[j], wr[j], b, part);
      [[unroll]] for (uint h = 0u; h < W_QUADS; ++h) {
        vec4 wq[TN];
        for (uint j = 0u; j < TN; ++j) wq[j] = W_QUAD(wp[j], part, h);
        TOKEN(0u) TOKEN(1u) TOKEN(2u) TOKEN(3u) TOKEN(4u) TOKEN(5u) TOKEN(6u) TOKEN(7u)
        TOKEN(8u) TOKEN(9u) TOKEN(10u) TOKEN(11u) TOKEN(12u) TOKEN(13u) TOKEN(14u) TOKEN(15u)
      }
    }
#ifdef W_BLOCK_SUMS
    for (uint j = 0u; j < TN; ++j)
      for (uint i = 0u; i < TM; ++i) acc[i][j] = fma(w_scale(wp[j]), sum[i][j], acc[i][j]);
#endif
  }
  store_tile(t0, o0, acc);
}
