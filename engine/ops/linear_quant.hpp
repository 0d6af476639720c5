// The linear kernels over Q8_0 / Q4_0 weights (shaders/linear_q.comp): which one a product
// takes, and its launch shape. engine/ops/linear.cpp asks here for every quantized W and
// dispatches the result like its float kernels (same bindings, epilogue, chunks, split-K).
//
// Auto: decode (T == 1) on CPU devices takes the row mat-vec (a lane per row, W and x
// through texel views, subgroup shuffles; also its _ln / _pick fusions), or the
// column-split one where the device prefers it (Caps::column_split_matvec) and it fits
// (quant_cols_fits); without x's texel view or shuffles the split-K mat-vec on W's texel
// view, else storage loads. GPUs: the 256-wide mat-vec. Prompts (T > 1) take the register
// GEMM on CPU devices (the broadcast kernel with subgroups, texel views where they exist;
// from kWideTileMinTokens tokens its wide tile, GemmRegistersWide: 2 tokens x 3 outputs a
// lane, as the float kernel's) and the tiled GEMM on GPUs.
// Forced kernels: MatVec, MatVecWide, MatVecTexel, MatVecRows (and MatVecRowsHeld, the
// same kernel: either holds x for K <= kMaxHeldInputs), MatVecCols, GemmRegisters,
// GemmRegistersWide and GemmTiled. The cooperative-matrix GEMM has no quantized form and
// throws DeviceError, as does a forced kernel whose needs (texel views, shuffles) the
// device lacks.
#pragma once
#include <cstdint>

#include "engine/ops/linear_kernel.hpp"

namespace gptvk::ops {

// Most texels of x one lane of the column-split kernel holds (linear_matvec_qcols.glsl, XQ_MAX).
constexpr uint32_t kMaxQuantColumnTexels = 256;

// Whether the column-split quantized mat-vec holds K inputs per lane on this device.
bool quant_cols_fits(const vk::Context& ctx, uint32_t K);

LinearKernel quant_auto_kernel(const vk::Context& ctx, uint32_t T, const Matrix& W, View x);
Kernel choose_quant_kernel(const vk::Context& ctx, LinearKernel want, uint32_t T, const Matrix& W, View x);

}  // namespace gptvk::ops
