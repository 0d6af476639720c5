// One linear kernel with its launch shape, as engine/ops/linear_kernels.cpp chooses it and
// engine/ops/linear.cpp dispatches it, for the float kernels (shaders/linear.comp) and the
// quantized ones (shaders/linear_q.comp) alike. Internal to the linear op.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/linear.hpp"

namespace gptvk::ops {

// One kernel with its tile sizes, as its shader expects them.
struct Kernel {
  std::string shader;
  // The workgroup grid: x over outputs and y over token groups (the split-K and row
  // mat-vecs, the batched row mat-vec), or x over token groups and y over outputs.
  bool outputs_in_x = true;
  // A GEMM whose tiles may split the inputs over several workgroups where tiles are few
  // (the tiled and cooperative-matrix GEMMs, on GPUs).
  bool splits_inputs = false;
  uint32_t local = 1;               // invocations per workgroup
  std::vector<uint32_t> tile;       // spec constants 7.. (see the kernel's .glsl)
  std::vector<uint32_t> after_split;  // constants after the split-K count (the matrix shape)
  uint32_t tokens_per_group = 1;    // workgroup grid: x over tokens ...
  uint32_t outputs_per_group = 1;   // ... y over outputs (mat-vec: x over outputs, y over tokens)
  bool texel = false;               // W binding is a uniform texel buffer (push constant w_base)
  bool x_texel = false;             // x binding is a uniform texel buffer (push constant x_base)
  bool norm_variant = false;        // has a "_ln" variant: LayerNorm of the output by the last workgroup
  bool pick_variant = false;        // has a "_pick" variant: greedy pick of the output by the last workgroup
  bool norm_before_variant = false; // has a "_lnin" variant: LayerNorm of x folded in (NormBefore)
};

// The kernel for T tokens of x through W (`want`, or Auto's choice), checked against what
// the device and W allow (DeviceError, std::invalid_argument or std::logic_error when
// forced where it cannot run): engine/ops/linear_kernels.cpp.
struct CoopMatTiles;
Kernel choose_kernel(const vk::Context& ctx, LinearKernel want, uint32_t T, const Matrix& W, View x, bool norm_before,
                     const CoopMatTiles* coopmat);

}  // namespace gptvk::ops
