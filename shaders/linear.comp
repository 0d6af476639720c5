#version 450
// Linear layer: y[t][o] = (residual ? r[t][o] : 0) + act(sum_i x[t][i] * W[o][i] + bias[o]),
// f32 accumulation, W in f32/f16/bf16 read as packed uvec4 words (engine/tensor.hpp).
// Kernels (engine/ops/linear_kernels.cpp picks one):
//   matvec_*     decode (T == 1): many outputs per workgroup, reduction across invocations
//                by subgroupAdd (needs subgroup arithmetic) or shared memory;
//                _lnin: with the LayerNorm of x folded in (common/linear_matvec.glsl);
//   matvec_rows  decode on CPU devices: rows per invocation, W and x through texel views;
//                _held: x fetched once per workgroup (K <= 1024), not once per row;
//                _ln: and the LayerNorm of the output row (common/linear_norm_after.glsl);
//                _pick: and the greedy pick of its largest output (common/linear_pick_after.glsl);
//                _batch: several tokens a workgroup, each word decoded once for them;
//   matvec_cols  the same with lanes splitting each row's columns, x held (CPUs that the
//                host says prefer it, Caps::column_split_matvec); _batch as above;
//   gemm_bcast   T > 1 on CPU devices with subgroups: register blocking, inputs shared by
//                subgroupShuffle instead of loaded by every invocation;
//   gemm_reg     the same without subgroup operations;
//   gemm_tiled   T > 1 on GPUs: shared-memory tiles, optionally split over K;
//   split_sum    the sum of gemm_tiled's split-K partial sums, with the epilogue.
// *_texel variants read W through a uniform texel buffer (CPU devices: vectorised fetches),
// *_x variants x too.
// *_xs variants read x one float at a time, for K not a multiple of 4 (unaligned rows).
//! variant matvec_subgroup MATVEC SUBGROUP
//! variant matvec_shared MATVEC
//! variant matvec_subgroup_xs MATVEC SUBGROUP X_SCALAR
//! variant matvec_shared_xs MATVEC X_SCALAR
//! variant matvec_subgroup_lnin MATVEC SUBGROUP LN_BEFORE
//! variant matvec_shared_lnin MATVEC LN_BEFORE
//! variant matvec_subgroup_texel MATVEC SUBGROUP TEXEL
//! variant matvec_shared_texel MATVEC TEXEL
//! variant matvec_subgroup_texel_xs MATVEC SUBGROUP TEXEL X_SCALAR
//! variant matvec_shared_texel_xs MATVEC TEXEL X_SCALAR
//! variant matvec_rows MATVEC_ROWS TEXEL X_TEXEL
//! variant matvec_rows_ln MATVEC_ROWS TEXEL X_TEXEL LN_AFTER
//! variant matvec_rows_held MATVEC_ROWS TEXEL X_TEXEL X_HELD
//! variant matvec_rows_held_ln MATVEC_ROWS TEXEL X_TEXEL X_HELD LN_AFTER
//! variant matvec_rows_pick MATVEC_ROWS TEXEL X_TEXEL PICK_AFTER
//! variant matvec_rows_held_pick MATVEC_ROWS TEXEL X_TEXEL X_HELD PICK_AFTER
//! variant matvec_rows_batch MATVEC_ROWS TEXEL X_TEXEL ROWS_BATCH
//! variant matvec_cols MATVEC_COLS TEXEL X_TEXEL
//! variant matvec_cols_ln MATVEC_COLS TEXEL X_TEXEL LN_AFTER
//! variant matvec_cols_pick MATVEC_COLS TEXEL X_TEXEL PICK_AFTER
//! variant matvec_cols_batch MATVEC_COLS TEXEL X_TEXEL COLS_BATCH
//! variant gemm_reg GEMM_REG
//! variant gemm_reg_xs GEMM_REG X_SCALAR
//! variant gemm_bcast GEMM_BCAST
//! variant gemm_bcast_xs GEMM_BCAST X_SCALAR
//! variant gemm_bcast_texel GEMM_BCAST TEXEL
//! variant gemm_bcast_texel_xs GEMM_BCAST TEXEL X_SCALAR
//! variant gemm_bcast_texel_x GEMM_BCAST TEXEL X_TEXEL
//! variant gemm_tiled GEMM_TILED
//! variant gemm_tiled_xs GEMM_TILED X_SCALAR
//! variant split_sum SPLIT_SUM X_SCALAR
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#ifdef TEXEL
#extension GL_EXT_samplerless_texture_functions : require
#endif
#if defined(GEMM_BCAST) || defined(MATVEC_ROWS) || defined(MATVEC_COLS)
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#extension GL_EXT_control_flow_attributes : require

#include "common/linear_io.glsl"

#if defined(MATVEC)
#include "common/linear_matvec.glsl"
#elif defined(MATVEC_ROWS) && defined(ROWS_BATCH)
#include "common/linear_matvec_rows_batch.glsl"
#elif defined(MATVEC_ROWS)
#include "common/linear_matvec_rows.glsl"
#elif defined(MATVEC_COLS)
#include "common/linear_matvec_cols.glsl"
#elif defined(GEMM_REG)
#include "common/linear_gemm_words.glsl"
#include "common/linear_gemm_reg.glsl"
#elif defined(GEMM_BCAST)
#include "common/linear_gemm_words.glsl"
#include "common/linear_gemm_bcast.glsl"
#elif defined(GEMM_TILED)
#include "common/linear_gemm_tiled.glsl"
#elif defined(SPLIT_SUM)
#include "common/linear_split_sum.glsl"
#endif
