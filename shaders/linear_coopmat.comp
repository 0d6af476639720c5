#version 450
// The linear layer's GEMM on matrix units (tensor cores) through cooperative matrices: f16
// inputs and weights, f32 accumulation, the epilogue of common/linear_io.glsl. One source
// for both GLSL extensions; cmake/Shaders.cmake builds a variant only where its glslang
// compiles the extension (a `requires:` word), and engine/ops/linear_coopmat.cpp offers it
// only where the device has it. The emu variants run it on emulated matrices
// (common/coopmat_emu.glsl) where GPTVK_FORCE=coopmat_emu asks, for tests.
// W is f16 or bf16 (DT 1 or 2) in the plain variants, Q8_0 or Q4_0 (DT 3 or 4,
// common/linear_quant.glsl) in the _q ones; all reach the matrix units as f16.
//! variant gemm_nv requires:coopmat_nv COOPMAT_NV
//! variant gemm_nv_xs requires:coopmat_nv COOPMAT_NV X_SCALAR
//! variant gemm_nv_q requires:coopmat_nv COOPMAT_NV QUANT_W
//! variant gemm_khr requires:coopmat_khr COOPMAT_KHR
//! variant gemm_khr_xs requires:coopmat_khr COOPMAT_KHR X_SCALAR
//! variant gemm_khr_q requires:coopmat_khr COOPMAT_KHR QUANT_W
//! variant gemm_emu COOPMAT_EMU
//! variant gemm_emu_xs COOPMAT_EMU X_SCALAR
//! variant gemm_emu_q COOPMAT_EMU QUANT_W
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if !defined(COOPMAT_EMU)
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

#include "common/linear_io.glsl"
#ifdef QUANT_W
#include "common/linear_quant.glsl"
#endif
#include "common/linear_coopmat.glsl"
