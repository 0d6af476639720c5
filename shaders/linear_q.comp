#version 450
// Linear layer over Q8_0 / Q4_0 weights (DT 3 / 4, engine/quant.hpp): the same bindings,
// constants and epilogue as shaders/linear.comp (common/linear_io.glsl), f32 accumulation,
// each block's int8 (or 4-bit) weights times its f16 scale. Kernels
// (engine/ops/linear_kernels.cpp picks one, as for shaders/linear.comp):
//   matvec_*     decode on GPUs and the fallback elsewhere: outputs per workgroup, the
//                inputs split by blocks across invocations (subgroupAdd or shared memory);
//   matvec_rows  decode on CPU devices: rows per lane, W and x through texel views, x
//                handed out by shuffles; _held: x fetched once (K <= 1024); _ln / _pick
//                as linear.comp's;
//   matvec_cols  the same with lanes splitting each row's blocks, x held (CPUs that the
//                host says prefer it, Caps::column_split_matvec); _batch: several tokens
//                a workgroup, each block decoded once for them (batched decode steps);
//   gemm_bcast   T > 1 on CPU devices with subgroups, x broadcast by shuffles;
//   gemm_reg     the same without subgroup operations (both linear.comp's kernels, over
//                the blocks of common/linear_quant.glsl);
//   gemm_tiled   T > 1 on GPUs: shared-memory tiles, W dequantized as it is staged.
// *_texel variants read W through a uniform texel buffer, *_x variants x too.
//! variant matvec_subgroup MATVEC_Q SUBGROUP
//! variant matvec_shared MATVEC_Q
//! variant matvec_subgroup_texel MATVEC_Q SUBGROUP TEXEL
//! variant matvec_shared_texel MATVEC_Q TEXEL
//! variant matvec_cols MATVEC_QCOLS TEXEL X_TEXEL
//! variant matvec_cols_ln MATVEC_QCOLS TEXEL X_TEXEL LN_AFTER
//! variant matvec_cols_pick MATVEC_QCOLS TEXEL X_TEXEL PICK_AFTER
//! variant matvec_cols_batch MATVEC_QCOLS TEXEL X_TEXEL COLS_BATCH
//! variant matvec_rows MATVEC_QROWS TEXEL X_TEXEL
//! variant matvec_rows_ln MATVEC_QROWS TEXEL X_TEXEL LN_AFTER
//! variant matvec_rows_pick MATVEC_QROWS TEXEL X_TEXEL PICK_AFTER
//! variant matvec_rows_held MATVEC_QROWS TEXEL X_TEXEL X_HELD
//! variant matvec_rows_held_ln MATVEC_QROWS TEXEL X_TEXEL X_HELD LN_AFTER
//! variant matvec_rows_held_pick MATVEC_QROWS TEXEL X_TEXEL X_HELD PICK_AFTER
//! variant gemm_reg GEMM_REG
//! variant gemm_reg_texel GEMM_REG TEXEL
//! variant gemm_bcast GEMM_BCAST
//! variant gemm_bcast_texel GEMM_BCAST TEXEL
//! variant gemm_bcast_texel_x GEMM_BCAST TEXEL X_TEXEL
//! variant gemm_tiled GEMM_QTILED
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#ifdef TEXEL
#extension GL_EXT_samplerless_texture_functions : require
#endif
#if defined(GEMM_BCAST) || defined(MATVEC_QCOLS) || defined(MATVEC_QROWS)
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#extension GL_EXT_control_flow_attributes : require

#include "common/linear_io.glsl"
#include "common/linear_quant.glsl"

#if defined(MATVEC_Q)
#include "common/linear_matvec_q.glsl"
#elif defined(MATVEC_QROWS)
#include "common/linear_matvec_qrows.glsl"
#elif defined(MATVEC_QCOLS)
#include "common/linear_matvec_qcols.glsl"
#elif defined(GEMM_REG)
#include "common/linear_gemm_reg.glsl"
#elif defined(GEMM_BCAST)
#include "common/linear_gemm_bcast.glsl"
#elif defined(GEMM_QTILED)
#include "common/linear_gemm_tiled.glsl"
#endif
