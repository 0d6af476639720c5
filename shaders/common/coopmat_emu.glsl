// Cooperative matrices emulated in plain code (common/coopmat.glsl's COOPMAT_EMU), so that
// the kernels written for matrix units run, slowly, on devices without them: their tiling,
// staging, masking and epilogues are then tested on lavapipe too
// (GPTVK_FORCE=gpu,coopmat_emu). Not a product path.
// An accumulator is spread over the subgroup: invocation l holds elements l, l + SUBGROUP,
// ... of it in row-major order. An A or B operand is where it lies in its shared array
// (first uvec4, stride, and for B the layout); MUL_ADD reads its halves there, from the
// arrays the kernel names.
const uint EMU_ELEMS = CM * CN / SUBGROUP;  // accumulator elements per invocation (the host checks it divides)

#define ACC_T float[EMU_ELEMS]
#define A_T uvec2  // (first uvec4, stride), row-major
#define B_T uvec3  // (first uvec4, stride, 1: column-major, 0: row-major)

// The 8 halves of a uvec4.
vec4 emu_lo(uvec4 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
vec4 emu_hi(uvec4 v) { return vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w)); }
float emu_half(uvec4 v, uint k) { return unpackHalf2x16(v[k / 2u])[k % 2u]; }
// Row and column of this invocation's accumulator element i.
uint emu_row(uint i) { return (gl_SubgroupInvocationID + i * SUBGROUP) / CN; }
uint emu_col(uint i) { return (gl_SubgroupInvocationID + i * SUBGROUP) % CN; }

// The loops stay loops ([[dont_unroll]]: unrolled, lavapipe's JIT takes seconds a
// pipeline), each iteration taking 8 halves: llvmpipe ends an invocation's loops silently
// after 65535 iterations in all, which the kernels' outer loops must stay far below.
#define ACC_ZERO(c) [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) c[i_] = 0.0
#define LOAD_A(m, arr, e, s) m = uvec2(e, s)
#define LOAD_B_COLS(m, arr, e, s) m = uvec3(e, s, 1u)
#define LOAD_B_ROWS(m, arr, e, s) m = uvec3(e, s, 0u)
#define LOAD_ACC(m, arr, e, s) \
  [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) m[i_] = arr[(e) + emu_row(i_) * (s) + emu_col(i_)]
#define STORE_ACC(m, arr, e, s) \
  [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) arr[(e) + emu_row(i_) * (s) + emu_col(i_)] = m[i_]
// c += A B, A's halves in a_arr, B's in b_arr. B column-major: inputs k .. k + 7 of column
// j are one uvec4; row-major: one half of each of 8 rows.
#define MUL_ADD(c, a, b, a_arr, b_arr)                                                       \
  [[dont_unroll]] for (uint i_ = 0u; i_ < EMU_ELEMS; ++i_) {                                \
    const uint r_ = emu_row(i_), j_ = emu_col(i_);                                          \
    float sum_ = c[i_];                                                                     \
    [[dont_unroll]] for (uint k_ = 0u; k_ < CK; k_ += 8u) {                                 \
      const uvec4 av_ = a_arr[a.x + r_ * a.y + k_ / 8u];                                    \
      vec4 blo_, bhi_;                                                                      \
      if (b.z == 1u) {                                                                      \
        const uvec4 bv_ = b_arr[b.x + j_ * b.y + k_ / 8u];                                  \
        blo_ = emu_lo(bv_);                                                                 \
        bhi_ = emu_hi(bv_);                                                                 \
      } else {                                                                              \
        [[unroll]] for (uint h_ = 0u; h_ < 4u; ++h_) {                                      \
          blo_[h_] = emu_half(b_arr[b.x + (k_ + h_) * b.y + j_ / 8u], j_ % 8u);             \
          bhi_[h_] = emu_half(b_arr[b.x + (k_ + 4u + h_) * b.y + j_ / 8u], j_ % 8u);        \
        }                                                                                   \
      }                                                                                     \
      sum_ += dot(emu_lo(av_), blo_) + dot(emu_hi(av_), bhi_);                              \
    }                                                                                       \
    c[i_] = sum_;                                                                           \
  }
#define STAGING_LOOP [[dont_unroll]]
#define MATRIX_LOOP [[dont_unroll]]
