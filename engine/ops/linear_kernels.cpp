// The linear op's kernel choice: which kernel multiplies T tokens of x by W on this device,
// with its launch shape and tile sizes (engine/ops/linear_kernel.hpp). linear.cpp records
// the dispatches.
#include <algorithm>
#include <bit>
#include <stdexcept>
#include <thread>

#include "engine/error.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "engine/ops/linear_kernel.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

// Weights per 16-byte (uvec4) word of a stored W row, the unit every linear kernel reads.
uint32_t weights_per_word(DType t) { return is_quantized(t) ? 16 : 16 / dtype_bytes(t); }

// The shader that holds W's kernels: shaders/linear.comp (f32 / f16 / bf16) or
// shaders/linear_q.comp (Q8_0 / Q4_0 blocks), which share their kernels' names, bindings,
// constants and launch shapes, so one choice below serves both.
std::string family(DType t) { return is_quantized(t) ? "linear_q." : "linear."; }

// The measurements behind each choice are in bench/PERFORMANCE.md ("Decode: the mat-vecs",
// "Prefill: the GEMM", "GPUs"); build/bench/micro/micro_linear reprints the CPU rates.

Kernel mat_vec(const vk::Context& ctx, DType dtype, uint32_t K, uint32_t T, bool wide, bool texel, bool norm_before) {
  const auto& caps = ctx.caps();
  Kernel k;
  k.shader = family(dtype) + (caps.subgroup_arithmetic ? "matvec_subgroup" : "matvec_shared");
  if (texel) k.shader += "_texel";
  k.texel = texel;
  k.norm_before_variant = !texel && !is_quantized(dtype);
  uint32_t rows;
  if (ctx.cpu_kernels() && !wide) {
    // One SIMD vector per workgroup (more invocations add no parallelism on lavapipe), 16
    // rows per workgroup so one load of x serves 16 rows of W: loads are the bound, not math.
    k.local = std::clamp<uint32_t>(caps.subgroup_size, 4, 16);
    rows = 16;
  } else {
    // GPUs: 256 invocations split the input dimension (adjacent invocations read adjacent
    // 16-byte words: coalesced), 2 rows per workgroup: many workgroups, each row's loads all
    // in flight at once. With a LayerNorm folded in, each workgroup also reads gamma and
    // reduces two more sums, which more rows share: 128 invocations x 4 rows. Both were
    // swept on an H100 (bench/PERFORMANCE.md, "GPUs").
    k.local = norm_before ? 128 : 256;
    rows = norm_before ? 4 : 2;
    if (is_quantized(dtype)) {
      // Q8_0 / Q4_0 lanes split a row by blocks of 32 weights: as many lanes as a row has
      // blocks (GPT-2 XL's 1600 inputs make 50, which 256 lanes would mostly leave idle),
      // and more rows per workgroup where the lanes are fewer, so each lane's 32 inputs
      // serve more rows.
      k.local = std::clamp<uint32_t>(std::bit_ceil(K / kQuantBlock), 32, 256);
      rows = std::clamp<uint32_t>(512 / k.local, 2, 16);
    }
  }
  k.local = std::min(k.local, caps.max_workgroup_invocations);  // stays a power of two
  // GPUs, several tokens (a batched decode step with exact rows): up to 8 a workgroup, so
  // each weight loaded serves them all; every token's sums stay those of its own mat-vec.
  // CPU devices (this kernel is their fallback) keep one: 16 rows' sums per token would
  // spill, and lavapipe's compile time grows with the unrolled sums.
  const uint32_t tokens = T <= 1 || ctx.cpu_kernels() ? 1 : std::min(8u, std::bit_floor(T));
  k.tile = {rows, tokens};
  k.outputs_per_group = rows;
  k.tokens_per_group = tokens;
  return k;
}

// Whether the device runs the kernels that hand values between invocations with
// subgroupShuffle on workgroups of exactly one subgroup (CPU devices: one SIMD vector).
bool one_subgroup_shuffles(const vk::Context& ctx) {
  const auto& caps = ctx.caps();
  return caps.subgroup_shuffle && caps.subgroup_size >= 4 && caps.subgroup_size <= 16 &&
         caps.subgroup_size <= caps.max_workgroup_invocations;
}

}  // namespace

bool row_matvec_supported(const vk::Context& ctx) { return one_subgroup_shuffles(ctx); }

bool last_workgroup_fusions(const vk::Context& ctx, LinearKernel k) {
  const bool row_kernel = k == LinearKernel::MatVecRows || k == LinearKernel::MatVecRowsHeld ||
                          k == LinearKernel::MatVecCols;
  return row_kernel && ctx.caps().subgroup_arithmetic;
}

bool broadcast_gemm_supported(const vk::Context& ctx) {
  return ctx.cpu_kernels() && ctx.caps().subgroup_arithmetic && one_subgroup_shuffles(ctx);
}

// A workgroup of the row mat-vec takes at least 8 rows of 4 invocations (one_subgroup_shuffles).
uint64_t pick_partials_bytes(uint32_t rows) { return (uint64_t(rows) / 32 + 1) * 8; }

bool norm_before_fits(const Matrix& W) {
  return !is_quantized(W.dtype) && W.cols % weights_per_word(W.dtype) == 0;
}

bool held_x_fits(uint32_t K, DType dtype) {
  return K <= kMaxHeldInputs && K % weights_per_word(dtype) == 0;
}

namespace {

// The texels of one token's inputs that each lane of the column-split mat-vec holds.
uint64_t column_split_texels(const vk::Context& ctx, uint32_t K, DType dtype) {
  const uint32_t local = ctx.caps().subgroup_size;
  // Lanes split a row by words of W, or by whole blocks of 32 weights (8 texels of x each).
  const uint32_t per_unit = is_quantized(dtype) ? kQuantBlock : weights_per_word(dtype);
  const uint64_t units = (uint64_t(K) + per_unit - 1) / per_unit, units_per_lane = (units + local - 1) / local;
  return units_per_lane * (per_unit / 4);
}

}  // namespace

bool column_split_fits(const vk::Context& ctx, uint32_t K, DType dtype) {
  return ctx.caps().subgroup_size != 0 && column_split_texels(ctx, K, dtype) <= kMaxColumnSplitTexels;
}

namespace {

// Decode on CPU devices: shaders/common/linear_matvec_rows.glsl. 16 rows per invocation
// (each input fetched or handed out serves more rows, in fewer workgroups) where the
// matrix still gives every CPU thread (lavapipe runs one per core) two workgroups or more,
// else 8, so that no thread idles.
// `held`: x fetched once per workgroup into a private array (K <= kMaxHeldInputs), not
// once per row (shaders/common/linear_matvec_rows.glsl, X_HELD).
Kernel mat_vec_rows(const vk::Context& ctx, DType dtype, uint32_t rows, bool held) {
  Kernel k;
  k.shader = family(dtype) + (held ? "matvec_rows_held" : "matvec_rows");
  k.texel = k.x_texel = true;
  k.norm_variant = k.pick_variant = ctx.caps().subgroup_arithmetic;  // last_workgroup_fusions
  k.local = ctx.caps().subgroup_size;
  const uint64_t threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t groups_of_16 = (uint64_t(rows) + 16 * k.local - 1) / (16 * k.local);
  const uint32_t rows_per_invocation = groups_of_16 >= 2 * threads ? 16 : 8;
  k.tile = {rows_per_invocation};
  k.outputs_per_group = rows_per_invocation * k.local;
  return k;
}

// Decode on CPU devices whose lanes split each row's columns
// (shaders/common/linear_matvec_cols.glsl): the same workgroup shape and rows per workgroup
// as the row kernel, which measured best for it too.
Kernel mat_vec_cols(const vk::Context& ctx, DType dtype, uint32_t rows) {
  Kernel k = mat_vec_rows(ctx, dtype, rows, false);
  k.shader = family(dtype) + "matvec_cols";
  return k;
}

// The column-split kernel over several tokens at once (LinearKernel::MatVecColsBatch): as
// many tokens a workgroup as the lanes can hold the inputs of, the T tokens spread evenly
// over as few workgroups as that allows.
Kernel mat_vec_cols_batch(const vk::Context& ctx, DType dtype, uint32_t K, uint32_t rows, uint32_t T) {
  Kernel k = mat_vec_cols(ctx, dtype, rows);
  k.outputs_in_x = false;
  k.shader += "_batch";
  k.norm_variant = k.pick_variant = false;
  const uint64_t per_token = column_split_texels(ctx, K, dtype);
  const uint32_t most = static_cast<uint32_t>(std::min<uint64_t>(kColsBatchTokens, kColsBatchTexels / per_token));
  const uint32_t groups = (T + most - 1) / most;
  k.tokens_per_group = (T + groups - 1) / groups;
  k.tile.push_back(k.tokens_per_group);
  return k;
}

// The row kernel over several tokens at once (LinearKernel::MatVecRowsBatch): its tokens
// spread over workgroups of up to kRowsBatchTokens.
Kernel mat_vec_rows_batch(const vk::Context& ctx, uint32_t rows, uint32_t T) {
  Kernel k = mat_vec_rows(ctx, DType::F16, rows, false);  // the dtype only names a shader, replaced here
  k.shader = "linear.matvec_rows_batch";
  k.norm_variant = k.pick_variant = false;
  const uint32_t groups = (T + kRowsBatchTokens - 1) / kRowsBatchTokens;
  k.tokens_per_group = (T + groups - 1) / groups;
  k.tile.push_back(k.tokens_per_group);
  return k;
}

Kernel gemm_registers(const vk::Context& ctx, DType dtype, bool wide_tile, bool w_texel, bool x_texel) {
  const auto& caps = ctx.caps();
  Kernel k;
  k.outputs_in_x = false;
  // With subgroups, the broadcast kernel, which beat every plain register tile: inputs
  // handed out by shuffles instead of loaded by every lane. It needs subgroupShuffle; GPUs
  // never get here unless a test forces this kernel. Texel views for the weights, and for
  // the inputs where they have one: lavapipe vectorises a texel fetch across the lanes,
  // where a storage load is a loop over them.
  if (broadcast_gemm_supported(ctx)) {
    k.shader = family(dtype) + "gemm_bcast";
    if (w_texel) {
      k.shader += "_texel";
      k.texel = true;
      k.x_texel = x_texel;
      if (x_texel) k.shader += "_x";
    }
    k.local = caps.subgroup_size;
    // Tokens per invocation (xt) x outputs per invocation (tn), as many accumulators as the
    // JIT keeps without spilling them in the inner loop. f32 words hold half as many
    // weights, so two tokens of four outputs each fit. The wide tile (2 x 3, 16-bit
    // weights, chunks of kWideTileMinTokens or more) makes each decoded weight serve 16
    // tokens instead of 8; shorter chunks would compute too many padded tokens. The narrow
    // tile (batched decode steps, short chunks) takes 1 x 6 for 16-bit weights, so each
    // shuffled input serves 6 outputs; Q8_0 / Q4_0 keep 1 x 4, their blocks' decoded parts
    // taking the registers that 6 outputs would need.
    const bool wide = dtype != DType::F32 && wide_tile;
    const uint32_t xt = dtype == DType::F32 || wide ? 2 : 1;
    const uint32_t tn = wide ? 3 : dtype == DType::F32 || is_quantized(dtype) ? 4 : 6;
    k.tile = {xt, tn};
    k.tokens_per_group = xt * k.local;
    k.outputs_per_group = k.local * tn;
    return k;
  }
  // 8 tokens x 8 outputs per invocation: on a path only CPU devices without subgroups take,
  // compile time counts more than the last few percent of speed. The quantized one has a
  // texel variant.
  k.shader = family(dtype) + "gemm_reg";
  k.local = std::min<uint32_t>(8, caps.max_workgroup_invocations);
  const uint32_t tm = 8, tn = 8, lm = 1;
  k.tile = {tm, tn, lm};
  if (is_quantized(dtype) && w_texel) {
    k.shader += "_texel";
    k.texel = true;
  }
  k.tokens_per_group = lm * tm;
  k.outputs_per_group = (k.local / lm) * tn;
  return k;
}

Kernel gemm_tiled(const vk::Context& ctx, DType dtype) {
  const auto& caps = ctx.caps();
  struct Tiles {
    uint32_t bm, bn, bk, tm, tn;
  };
  // The first that fits shared memory ((bm + bn) * bk floats) and the workgroup limit, in
  // the order they ran on an H100 (larger tiles leave most multiprocessors idle on GPT-2's
  // products).
  const Tiles options[] = {{64, 64, 16, 4, 4}, {64, 64, 16, 8, 8}, {32, 32, 8, 4, 4}};
  for (const auto& t : options) {
    uint32_t local = (t.bm / t.tm) * (t.bn / t.tn);
    uint64_t shared = uint64_t(t.bm + t.bn) * t.bk * 4;
    if (shared > caps.shared_memory_bytes || local > caps.max_workgroup_invocations) continue;
    Kernel k;
    k.outputs_in_x = false;
    k.splits_inputs = true;
    k.shader = family(dtype) + "gemm_tiled";
    k.local = local;
    k.tile = {t.bm, t.bn, t.bk, t.tm, t.tn};
    k.tokens_per_group = t.bm;
    k.outputs_per_group = t.bn;
    return k;
  }
  throw DeviceError("linear: the device has too little shared memory for the tiled GEMM");
}

Kernel gemm_coopmat(const vk::Context& ctx, uint32_t T, const Matrix& W, const CoopMatTiles* forced) {
  const auto tiles = !coopmat_available(ctx, W) ? std::nullopt
                     : forced                   ? std::optional<CoopMatTiles>(*forced)
                                                : coopmat_tiles(ctx, T);
  if (!tiles)
    throw DeviceError("linear: the cooperative-matrix GEMM needs a device with matrix units and f16, bf16 (within "
                      "f16's range), q8_0 or q4_0 weights");
  Kernel k;
  k.outputs_in_x = false;
  k.splits_inputs = true;
  k.shader = tiles->shader + (is_quantized(W.dtype) ? "_q" : "");
  k.local = tiles->local;
  k.tile = tiles->tile_constants();
  k.after_split = tiles->shape_constants();
  k.tokens_per_group = tiles->bm;
  k.outputs_per_group = tiles->bn;
  return k;
}

// x can be read through its buffer's texel view: one exists and token rows start on whole
// 16-byte texels.
bool x_texel_ok(View x, uint32_t K) {
  return x.buffer->texel_view() != VK_NULL_HANDLE && x.offset % 16 == 0 && K % 4 == 0;
}

}  // namespace

LinearKernel decode_kernel(const vk::Context& ctx, uint32_t K, DType dtype, bool w_texel, bool x_texel) {
  if (!ctx.cpu_kernels()) return LinearKernel::MatVec;
  // CPU devices read through texel views where they can: decode with rows per invocation
  // (both views), else the split-K texel mat-vec (W's view only, still faster than
  // storage loads).
  if (!(w_texel && x_texel && one_subgroup_shuffles(ctx))) return w_texel ? LinearKernel::MatVecTexel : LinearKernel::MatVec;
  if (ctx.caps().column_split_matvec && column_split_fits(ctx, K, dtype)) return LinearKernel::MatVecCols;
  return held_x_fits(K, dtype) ? LinearKernel::MatVecRowsHeld : LinearKernel::MatVecRows;
}

LinearKernel auto_kernel(const vk::Context& ctx, uint32_t T, const Matrix& W, View x) {
  if (T == 1) return decode_kernel(ctx, W.cols, W.dtype, W.has_texel_views(), x_texel_ok(x, W.cols));
  if (!ctx.cpu_kernels())
    return coopmat_available(ctx, W) && coopmat_tiles(ctx, T) ? LinearKernel::GemmCoopMat : LinearKernel::GemmTiled;
  // The wide tile takes 2 tokens per lane (gemm_registers): 16-bit weights' chunks that it
  // fills exactly take it at any length, such as a batched step of 16 rows (checked
  // bit-identical to the row mat-vec, for those weights only).
  const uint32_t wide_tokens = 2 * std::max(ctx.caps().subgroup_size, 1u);
  const bool whole_wide_groups = !is_quantized(W.dtype) && T % wide_tokens == 0;
  return T >= kWideTileMinTokens || whole_wide_groups ? LinearKernel::GemmRegistersWide : LinearKernel::GemmRegisters;
}

Kernel choose_kernel(const vk::Context& ctx, LinearKernel want, uint32_t T, const Matrix& W, View x, bool norm_before,
                     const CoopMatTiles* coopmat) {
  const uint32_t K = W.cols;
  if (is_quantized(W.dtype) && K % kQuantBlock != 0)
    throw std::logic_error(std::string("linear: ") + dtype_name(W.dtype) + " weights with " + std::to_string(K) + " columns");
  if (is_quantized(W.dtype) && want == LinearKernel::MatVecRowsBatch)
    throw DeviceError(std::string("linear: ") + dtype_name(W.dtype) + " weights have no batched row mat-vec");
  const bool w_texel = W.has_texel_views(), x_texel = x_texel_ok(x, K);
  if (want == LinearKernel::Auto && norm_before) want = LinearKernel::MatVec;  // the one kernel with it
  if (want == LinearKernel::Auto) want = auto_kernel(ctx, T, W, x);
  const bool cols = want == LinearKernel::MatVecCols || want == LinearKernel::MatVecColsBatch;
  const bool rows = want == LinearKernel::MatVecRows || want == LinearKernel::MatVecRowsHeld || cols ||
                    want == LinearKernel::MatVecRowsBatch;
  if ((want == LinearKernel::MatVecTexel || rows) && !w_texel)
    throw DeviceError("linear: the texel mat-vec needs W with texel views, which this device cannot make");
  if (rows && !(x_texel && one_subgroup_shuffles(ctx)))
    throw DeviceError("linear: the row mat-vec needs x with a 16-byte aligned texel view and subgroup shuffles");
  if (want == LinearKernel::MatVecRowsHeld && !held_x_fits(W.cols, W.dtype))
    throw std::invalid_argument("linear: the held-x row mat-vec takes at most " + std::to_string(kMaxHeldInputs) +
                                " inputs in whole weight words, not " + std::to_string(K));
  if (cols && !column_split_fits(ctx, K, W.dtype))
    throw std::invalid_argument("linear: the column-split mat-vec holds at most " +
                                std::to_string(kMaxColumnSplitTexels) + " texels of x per lane, " +
                                std::to_string(K) + " inputs need more");
  const DType dt = W.dtype;
  Kernel k = want == LinearKernel::MatVec          ? mat_vec(ctx, dt, K, T, false, false, norm_before)
             : want == LinearKernel::MatVecWide    ? mat_vec(ctx, dt, K, T, true, false, norm_before)
             : want == LinearKernel::MatVecTexel   ? mat_vec(ctx, dt, K, T, false, true, false)
             : want == LinearKernel::MatVecCols    ? mat_vec_cols(ctx, dt, W.rows)
             : want == LinearKernel::MatVecColsBatch ? mat_vec_cols_batch(ctx, dt, K, W.rows, T)
             : want == LinearKernel::MatVecRowsBatch ? mat_vec_rows_batch(ctx, W.rows, T)
             : rows                                ? mat_vec_rows(ctx, dt, W.rows, want == LinearKernel::MatVecRowsHeld)
             : want == LinearKernel::GemmRegisters || want == LinearKernel::GemmRegistersWide
                 ? gemm_registers(ctx, dt, want == LinearKernel::GemmRegistersWide, w_texel, x_texel)
             : want == LinearKernel::GemmCoopMat ? gemm_coopmat(ctx, T, W, coopmat)
                                                   : gemm_tiled(ctx, dt);
  // Token rows of x are 16-byte aligned (vec4 loads) only when K is a multiple of 4.
  if (K % 4 != 0) k.shader += "_xs";
  return k;
}

}  // namespace gptvk::ops
