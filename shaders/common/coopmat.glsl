// The cooperative-matrix operations the matrix-unit kernels use (shaders/linear_coopmat.comp,
// shaders/attention_coopmat.comp), one set of macros over three implementations:
// GL_KHR_cooperative_matrix (COOPMAT_KHR), GL_NV_cooperative_matrix (COOPMAT_NV, what
// Debian 12's glslang compiles) and an emulation in plain code (COOPMAT_EMU,
// common/coopmat_emu.glsl) for devices without matrix units. Include after the spec constants
// CM, CN, CK (the device's shape: A is CM x CK, B CK x CN, the accumulator CM x CN) and
// SUBGROUP. A and B are f16, loaded from shared arrays of uvec4s holding 8 halves each;
// offsets and strides count those uvec4s, as the extensions define. Accumulators are f32,
// loaded from and stored to float arrays.
//   ACC_T, A_T, B_T            the three types
//   ACC_ZERO(c)                c = 0
//   LOAD_A(m, arr, e, s)       A row-major: element (i, k) in row e + i * s
//   LOAD_B_COLS(m, arr, e, s)  B column-major: element (k, j) in column e + j * s
//   LOAD_B_ROWS(m, arr, e, s)  B row-major: element (k, j) in row e + k * s
//   LOAD_ACC(m, arr, e, s)     accumulator row-major: element (i, j) at e + i * s + j
//   STORE_ACC(m, arr, e, s)    the same, stored
//   MUL_ADD(c, a, b, a_arr, b_arr)  c += a b, a and b loaded from those arrays (which
//                              only the emulation reads)
//   STAGING_LOOP, MATRIX_LOOP  loops staging data from memory to shared arrays, and over a
//                              kernel's matrices: [[unroll]], but loops in the emulation
//                              (JIT time on lavapipe)
#if defined(COOPMAT_EMU)
#include "common/coopmat_emu.glsl"
#elif defined(COOPMAT_KHR)
#extension GL_KHR_cooperative_matrix : require
#define ACC_T coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>
#define A_T coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define B_T coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>
#define ACC_ZERO(c) c = ACC_T(0.0)
#define LOAD_A(m, arr, e, s) coopMatLoad(m, arr, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_B_COLS(m, arr, e, s) coopMatLoad(m, arr, e, s, gl_CooperativeMatrixLayoutColumnMajor)
#define LOAD_B_ROWS(m, arr, e, s) coopMatLoad(m, arr, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_ACC(m, arr, e, s) coopMatLoad(m, arr, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define STORE_ACC(m, arr, e, s) coopMatStore(m, arr, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define MUL_ADD(c, a, b, a_arr, b_arr) c = coopMatMulAdd(a, b, c)
#define STAGING_LOOP [[unroll]]
#define MATRIX_LOOP [[unroll]]
#else
#extension GL_NV_cooperative_matrix : require
#define ACC_T fcoopmatNV<32, gl_ScopeSubgroup, CM, CN>
#define A_T fcoopmatNV<16, gl_ScopeSubgroup, CM, CK>
#define B_T fcoopmatNV<16, gl_ScopeSubgroup, CK, CN>
#define ACC_ZERO(c) c = ACC_T(0.0)
#define LOAD_A(m, arr, e, s) coopMatLoadNV(m, arr, e, s, false)
#define LOAD_B_COLS(m, arr, e, s) coopMatLoadNV(m, arr, e, s, true)
#define LOAD_B_ROWS(m, arr, e, s) coopMatLoadNV(m, arr, e, s, false)
#define LOAD_ACC(m, arr, e, s) coopMatLoadNV(m, arr, e, s, false)
#define STORE_ACC(m, arr, e, s) coopMatStoreNV(m, arr, e, s, false)
#define MUL_ADD(c, a, b, a_arr, b_arr) c = coopMatMulAddNV(a, b, c)
#define STAGING_LOOP [[unroll]]
#define MATRIX_LOOP [[unroll]]
#endif
