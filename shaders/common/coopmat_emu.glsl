// Cooperative matrices emulated with plain subgroup code, so that the kernels written for
// matrix units (common/linear_coopmat.glsl) run, slowly, on devices without them: their
// tiling, staging, split-K and epilogues are then tested on lavapipe too
// (GPTVK_FORCE=gpu,coopmat_emu; tests/test_linear_coopmat.cpp). Not a product path.
//
// An accumulator is a CM x CN matrix spread over the subgroup: invocation l holds elements
// l, l + SUBGROUP, ... in row-major order. The kernel loads its A operands only from
// x_tile and its B operands only from w_tile (staged uvec4s of 8 halves), so an emulated A
// or B is where it starts in that array and its stride (uvec4s), and the multiply reads the
// halves from there.
const uint EMU_ELEMS = CM * CN / SUBGROUP;  // accumulator elements per invocation (the host checks it divides)

#define ACC_T float[EMU_ELEMS]
#define A_T uvec2
#define B_T uvec2
#define ACC_ZERO(c) [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) c[i_] = 0.0
#define LOAD_ROWS(m, a, e, s) m = uvec2(e, s)
#define LOAD_COLS(m, a, e, s) m = uvec2(e, s)
#define STORE_ROWS(m, a, e, s)                                      \
  [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) {                        \
    const uint at_ = gl_SubgroupInvocationID + i_ * SUBGROUP;       \
    a[(e) + (at_ / CN) * (s) + at_ % CN] = m[i_];                   \
  }
#define MUL_ADD(c, a, b) emu_mul_add(c, a, b)

// The 8 halves of a staged uvec4.
void emu_halves(uvec4 v, out vec4 lo, out vec4 hi) {
  lo = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
  hi = vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w));
}

// c += A B: A's rows (row-major) at a in x_tile, B's columns (column-major) at b in w_tile.
void emu_mul_add(inout float c[EMU_ELEMS], uvec2 a, uvec2 b) {
  [[dont_unroll]] for (uint i = 0u; i < EMU_ELEMS; ++i) {
    const uint at = gl_SubgroupInvocationID + i * SUBGROUP, row = at / CN, col = at % CN;
    float sum = c[i];
    [[dont_unroll]] for (uint k = 0u; k < CK; k += 8u) {
      vec4 a_lo, a_hi, b_lo, b_hi;
      emu_halves(x_tile[a.x + row * a.y + k / 8u], a_lo, a_hi);
      emu_halves(w_tile[b.x + col * b.y + k / 8u], b_lo, b_hi);
      sum += dot(a_lo, b_lo) + dot(a_hi, b_hi);
    }
    c[i] = sum;
  }
}
