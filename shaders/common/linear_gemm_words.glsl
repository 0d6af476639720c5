// f32 / f16 / bf16 weights for the CPU GEMMs (common/linear_gemm_bcast.glsl,
// common/linear_gemm_reg.glsl; Q8_0 / Q4_0 blocks are in common/linear_quant.glsl): a
// block is one uvec4 word of the row (engine/tensor.hpp), loaded and decoded at once, a
// single part whose quads are its decoded halves (one for f32). The row's partial last
// word reads its zero padding against inputs of 0 (load_x4_in_row).
const uint W_BLOCKS = K_WORDS;  // blocks per row
const uint W_PARTS = 1u;        // parts per block, each loaded at once
const uint W_QUADS = KW / 4u;   // groups of 4 weights per part

struct WPart {
  vec4 lo, hi;  // elements 0..3 and 4..7 of the word, decoded
};

void w_load(inout WPart w, uint wrow, uint b, uint part) { decode(load_w(wrow + b), w.lo, w.hi); }

vec4 w_quad(WPart w, uint part, uint h) { return h == 0u ? w.lo : w.hi; }
