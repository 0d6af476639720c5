#include "engine/ops/linear_quant.hpp"

#include <algorithm>
#include <thread>

#include "engine/error.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

bool x_texel_ok(View x, uint32_t K) {
  return x.buffer->texel_view() != VK_NULL_HANDLE && x.offset % 16 == 0 && K % 4 == 0;
}

// Decode on GPUs (wide): 256 invocations over each row's blocks, 2 rows per workgroup, as
// the float mat-vec (engine/ops/linear.cpp, mat_vec). CPU devices: one SIMD vector, 16 rows.
Kernel mat_vec(const vk::Context& ctx, bool wide, bool texel) {
  const auto& caps = ctx.caps();
  Kernel k;
  k.kind = LinearKernel::MatVec;
  k.shader = caps.subgroup_arithmetic ? "linear_q.matvec_subgroup" : "linear_q.matvec_shared";
  if (texel) k.shader += "_texel";
  k.texel = texel;
  const bool cpu_shape = ctx.cpu_kernels() && !wide;
  k.local = cpu_shape ? std::clamp<uint32_t>(caps.subgroup_size, 4, 16) : 256;
  k.local = std::min(k.local, caps.max_workgroup_invocations);
  const uint32_t rows = cpu_shape ? 16 : 2;
  k.tile = {rows};
  k.outputs_per_group = rows;
  return k;
}

// Decode on CPU devices, a lane per row: 16 rows per lane where the matrix still gives every
// CPU thread two workgroups or more, else 8 (the float row kernel's choice). `held`: x
// fetched once per workgroup (K <= kMaxHeldInputs), not once per row.
Kernel mat_vec_rows(const vk::Context& ctx, uint32_t rows, bool held) {
  Kernel k;
  k.kind = LinearKernel::MatVec;  // grid: x over outputs, y over tokens
  k.shader = held ? "linear_q.matvec_rows_held" : "linear_q.matvec_rows";
  k.texel = k.x_texel = true;
  k.norm_variant = k.pick_variant = ctx.caps().subgroup_arithmetic;
  k.local = ctx.caps().subgroup_size;
  const uint64_t threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t groups_of_16 = (uint64_t(rows) + 16 * k.local - 1) / (16 * k.local);
  const uint32_t per_lane = groups_of_16 >= 2 * threads ? 16 : 8;
  k.tile = {per_lane};
  k.outputs_per_group = per_lane * k.local;
  return k;
}

// Decode on CPU devices: 16 groups of LOCAL rows per workgroup, as the float column split.
Kernel mat_vec_cols(const vk::Context& ctx) {
  Kernel k;
  k.kind = LinearKernel::MatVec;  // grid: x over outputs, y over tokens
  k.shader = "linear_q.matvec_cols";
  k.texel = k.x_texel = true;
  k.norm_variant = k.pick_variant = ctx.caps().subgroup_arithmetic;
  k.local = ctx.caps().subgroup_size;
  k.tile = {16};
  k.outputs_per_group = 16 * k.local;
  return k;
}

// Prompts on CPU devices. With subgroups: one subgroup per workgroup, 4 outputs per
// invocation for its LOCAL tokens (each decoded weight serves LOCAL tokens); the wide tile
// 3 outputs for 2 LOCAL tokens (GPT-2 small q8_0 on lavapipe, 128-token prompt, two
// alternating pairs: 76-122 -> 128-144 tok/s, f16 at 140 in the same minutes). Without: 8
// tokens x 8 outputs per invocation, 8 invocations.
Kernel gemm_registers(const vk::Context& ctx, bool wide, bool w_texel, bool x_texel) {
  const auto& caps = ctx.caps();
  Kernel k;
  k.kind = LinearKernel::GemmRegisters;
  if (caps.subgroup_arithmetic && row_matvec_supported(ctx)) {
    k.shader = "linear_q.gemm_bcast";
    if (w_texel) {
      k.shader += "_texel";
      k.texel = true;
      k.x_texel = x_texel;
      if (x_texel) k.shader += "_x";
    }
    k.local = caps.subgroup_size;
    const uint32_t xt = wide ? 2 : 1, tn = wide ? 3 : 4;
    k.tile = {xt, tn};
    k.tokens_per_group = xt * k.local;
    k.outputs_per_group = k.local * tn;
    return k;
  }
  k.shader = w_texel ? "linear_q.gemm_reg_texel" : "linear_q.gemm_reg";
  k.texel = w_texel;
  k.local = std::min<uint32_t>(8, caps.max_workgroup_invocations);
  k.tile = {8, 8};
  k.tokens_per_group = 8;
  k.outputs_per_group = k.local * 8;
  return k;
}

// Prompts on GPUs: the first tile shape that fits shared memory and the workgroup limit
// (the float tiled GEMM's options).
Kernel gemm_tiled(const vk::Context& ctx) {
  const auto& caps = ctx.caps();
  struct Tiles {
    uint32_t bm, bn, bk, tm, tn;
  };
  const Tiles options[] = {{64, 64, 16, 4, 4}, {64, 64, 16, 8, 8}, {32, 32, 8, 4, 4}};
  for (const auto& t : options) {
    const uint32_t local = (t.bm / t.tm) * (t.bn / t.tn);
    if (uint64_t(t.bm + t.bn) * t.bk * 4 > caps.shared_memory_bytes || local > caps.max_workgroup_invocations) continue;
    Kernel k;
    k.kind = LinearKernel::GemmTiled;
    k.shader = "linear_q.gemm_tiled";
    k.local = local;
    k.tile = {t.bm, t.bn, t.bk, t.tm, t.tn};
    k.tokens_per_group = t.bm;
    k.outputs_per_group = t.bn;
    return k;
  }
  throw DeviceError("linear: the device has too little shared memory for the tiled GEMM");
}

}  // namespace

bool quant_cols_fits(const vk::Context& ctx, uint32_t K) {
  const uint32_t local = ctx.caps().subgroup_size;
  if (local == 0) return false;
  const uint64_t blocks = K / kQuantBlock, per_lane = (blocks + local - 1) / local;
  return per_lane * 8 <= kMaxQuantColumnTexels;
}

LinearKernel quant_auto_kernel(const vk::Context& ctx, uint32_t T, const Matrix& W, View x) {
  const bool cpu = ctx.cpu_kernels();
  if (T > 1)
    return !cpu ? LinearKernel::GemmTiled
           : T >= kWideTileMinTokens ? LinearKernel::GemmRegistersWide : LinearKernel::GemmRegisters;
  if (!cpu) return LinearKernel::MatVec;
  const bool w_texel = W.has_texel_views();
  if (!(w_texel && x_texel_ok(x, W.cols) && row_matvec_supported(ctx)))
    return w_texel ? LinearKernel::MatVecTexel : LinearKernel::MatVec;
  return ctx.caps().column_split_matvec && quant_cols_fits(ctx, W.cols) ? LinearKernel::MatVecCols
                                                                         : LinearKernel::MatVecRows;
}

Kernel choose_quant_kernel(const vk::Context& ctx, LinearKernel want, uint32_t T, const Matrix& W, View x) {
  const std::string dt = dtype_name(W.dtype);
  if (W.cols % kQuantBlock != 0)
    throw std::logic_error("linear: " + dt + " weights with " + std::to_string(W.cols) + " columns");
  if (want == LinearKernel::Auto) want = quant_auto_kernel(ctx, T, W, x);
  const bool w_texel = W.has_texel_views(), x_texel = x_texel_ok(x, W.cols);
  switch (want) {
    case LinearKernel::MatVec: return mat_vec(ctx, false, false);
    case LinearKernel::MatVecWide: return mat_vec(ctx, true, false);
    case LinearKernel::MatVecTexel:
      if (!w_texel) throw DeviceError("linear: the texel mat-vec needs W with texel views, which this device cannot make");
      return mat_vec(ctx, false, true);
    case LinearKernel::MatVecRows:
    case LinearKernel::MatVecRowsHeld:
      if (!(w_texel && x_texel && row_matvec_supported(ctx)))
        throw DeviceError("linear: the " + dt + " row mat-vec needs W and x with texel views and subgroup shuffles");
      return mat_vec_rows(ctx, W.rows, W.cols <= kMaxHeldInputs);
    case LinearKernel::MatVecCols:
      if (!(w_texel && x_texel && row_matvec_supported(ctx)))
        throw DeviceError("linear: the " + dt + " column-split mat-vec needs W and x with texel views and subgroup shuffles");
      if (!quant_cols_fits(ctx, W.cols))
        throw std::invalid_argument("linear: the " + dt + " column-split mat-vec holds at most " +
                                    std::to_string(kMaxQuantColumnTexels) + " texels of x per lane, " +
                                    std::to_string(W.cols) + " inputs need more");
      return mat_vec_cols(ctx);
    case LinearKernel::GemmRegisters:
    case LinearKernel::GemmRegistersWide:
      return gemm_registers(ctx, want == LinearKernel::GemmRegistersWide, w_texel, x_texel);
    case LinearKernel::GemmTiled: return gemm_tiled(ctx);
    default:
      throw DeviceError("linear: " + dt + " weights have no " +
                        "cooperative-matrix GEMM" +
                        " (engine/ops/linear_quant.hpp lists their kernels)");
  }
}

}  // namespace gptvk::ops
