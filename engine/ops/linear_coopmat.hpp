// Launch shapes of the linear layer's cooperative-matrix GEMM (shaders/linear_coopmat.comp,
// GPUs with matrix units): the device's matrix shape and the tile a workgroup computes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/tensor.hpp"
#include "engine/vk/coopmat.hpp"

namespace gptvk::vk {
class Context;
}

namespace gptvk::ops {

struct CoopMatTiles {
  uint32_t bm = 0, bn = 0, bk = 0;  // the workgroup's tile: tokens x outputs, inputs staged per step
  uint32_t tm = 0, tn = 0;          // accumulators per subgroup along tokens and outputs
  uint32_t cm = 0, cn = 0, ck = 0;  // the device's matrix shape
  uint32_t subgroup = 0;            // invocations per subgroup
  uint32_t local = 0;               // invocations per workgroup
  std::string shader;               // "linear_coopmat.gemm_nv", "_khr", or "_emu" (emulated); + "_q" for Q8_0 / Q4_0
  // Specialization constants 7-11 (tile) and 13-16 (matrix shape, subgroup size) of the
  // shader; 12 is split-K.
  std::vector<uint32_t> tile_constants() const { return {bm, bn, bk, tm, tn}; }
  std::vector<uint32_t> shape_constants() const { return {cm, cn, ck, subgroup}; }
};

// The device's matrix shape the kernels use (engine/ops/linear_coopmat.cpp says which);
// empty without cooperative matrices.
std::optional<vk::CoopMatShape> coopmat_shape(const vk::Context& ctx);

// Whether this device runs the cooperative-matrix GEMM on W of this dtype: f16 (copied as
// stored), bf16 (converted to f16), Q8_0 and Q4_0 (dequantized to f16) as W is staged; not
// f32, whose models keep f32 products.
bool coopmat_available(const vk::Context& ctx, DType w_dtype);
// The same for this matrix: a bf16 one whose values pass f16's range (Matrix::outside_f16)
// keeps the other kernels, where its values would become infinities.
bool coopmat_available(const vk::Context& ctx, const Matrix& W);

// The tiles of `wm` x `wn` subgroups, each with tm x tn accumulators of the device's
// `shape`; empty where they exceed the device's shared memory or workgroup size.
std::optional<CoopMatTiles> coopmat_tiles_of(const vk::Context& ctx, vk::CoopMatShape shape, uint32_t wm, uint32_t wn,
                                             uint32_t tm, uint32_t tn);

// The tiles for a product of T tokens on this device: one matrix row of tokens by 4 subgroups'
// accumulators (engine/ops/linear_coopmat.cpp says why). Empty where the device lists no
// matrix shape the kernel takes, or the tile does not fit its shared memory or workgroup
// size.
std::optional<CoopMatTiles> coopmat_tiles(const vk::Context& ctx, uint32_t T);

}  // namespace gptvk::ops
