// Reading Q8_0 / Q4_0 rows (engine/quant.hpp): each stored row is its block scales (f16,
// 8 to a 16-byte word, QSW words) followed by its blocks of 32 weights, QWB words each
// (Q8_0: int8, element i in byte i; Q4_0: element i < 16 in the low nibble of byte i,
// 16 + i in its high nibble). load_w(i) reads word i of W (common/linear_io.glsl). The
// host takes these kernels only for K a multiple of 32, so there is no partial block.
#define LINEAR_QUANT_W  // the shared kernels read W through the functions below
const bool Q4 = DT == 4u;
const uint QB = K / 32u;            // blocks per row
const uint QSW = (QB + 7u) / 8u;    // scale words at the start of a row
const uint QWB = Q4 ? 1u : 2u;      // data words per block

// Component i of a word by selects: a vector indexed by a value the compiler cannot fold
// goes to per-lane scratch memory on lavapipe (every access a loop over the lanes); with
// a constant index the selects fold away.
uint q_component(uvec4 v, uint i) { return i == 0u ? v.x : i == 1u ? v.y : i == 2u ? v.z : v.w; }

// The scale of block b from the scale word that holds it (word b / 8 of the row).
float q_scale(uvec4 sw, uint b) {
  uint u = q_component(sw, (b >> 1) & 3u);
  return unpackHalf2x16((b & 1u) != 0u ? u >> 16 : u).x;
}

// The data words of block b of the row starting at word wrow (Q4_0: one word, twice).
void q_block(uint wrow, uint b, out uvec4 p[2]) {
  p[0] = load_w(wrow + QSW + b * QWB);
  p[1] = Q4 ? p[0] : load_w(wrow + QSW + b * QWB + 1u);
}

// Weights 4h .. 4h + 3 of a block (h < 8), unscaled: shifts put each int8 (nibble) at the
// top of a lane and an arithmetic shift brings it down sign-extended (Q4_0: less 8).
vec4 q_quad(uvec4 p[2], uint h) {
  if (Q4) {
    uvec4 u = uvec4(q_component(p[0], h & 3u)) >> (uvec4(0u, 8u, 16u, 24u) + (h >= 4u ? 4u : 0u));
    return vec4(ivec4(u & 15u) - 8);
  }
  uint u = q_component(h >= 4u ? p[1] : p[0], h & 3u);
  return vec4(ivec4(u << 24, u << 16, u << 8, u) >> 24);
}

// The dot product of a block's weights (unscaled) with its 32 inputs.
float q_block_dot(uvec4 p[2], vec4 x[8]) {
  float s = 0.0;
  [[unroll]] for (uint h = 0u; h < 8u; ++h) s = fma4(q_quad(p, h), x[h], s);
  return s;
}

// The 32 inputs of block b of the token row at element offset xrow.
void q_load_x(uint xrow, uint b, out vec4 x[8]) {
  [[unroll]] for (uint h = 0u; h < 8u; ++h) x[h] = load_x4(xrow + b * 32u + h * 4u);
}

// The weights as the CPU GEMMs read them (common/linear_gemm_bcast.glsl,
// common/linear_gemm_reg.glsl; float words are in common/linear_gemm_words.glsl): a block
// of 32 in two parts, one data word loaded at a time (Q8_0: weights 16 part .. 16 part + 15;
// Q4_0: the block's one word, its low nibbles then its high ones) so that fewer values stay
// live; the scale comes with the first part. Quad h of a part: its weights 4h .. 4h + 3,
// decoded and scaled, so each serves every token of the tile.
const uint W_BLOCKS = QB;
const uint W_PARTS = 2u;
const uint W_QUADS = 4u;

struct WPart {
  float d;       // the block's scale
  uvec4 p[2];    // the part's data word, twice (q_quad's operand)
};

void w_load(inout WPart w, uint wrow, uint b, uint part) {
  if (part == 0u) w.d = q_scale(load_w(wrow + b / 8u), b);
  w.p[0] = load_w(wrow + QSW + b * QWB + (Q4 ? 0u : part));
  w.p[1] = w.p[0];
}

vec4 w_quad(WPart w, uint part, uint h) { return q_quad(w.p, part * 4u + h) * w.d; }

// The row mat-vecs' order (common/linear_matvec_qrows.glsl, which batched decode with exact
// rows relies on): each block's unscaled quads summed from 0, then its scale times that sum
// added to the output. common/linear_gemm_bcast.glsl takes it where W_BLOCK_SUMS is defined.
#define W_BLOCK_SUMS
vec4 w_quad_unscaled(WPart w, uint part, uint h) { return q_quad(w.p, part * 4u + h); }
float w_scale(WPart w) { return w.d; }
