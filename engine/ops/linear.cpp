#include "engine/ops/linear.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "engine/error.hpp"
#include "engine/ops/layernorm.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "engine/ops/linear_kernel.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

constexpr uint32_t kMaxGroups = 65535;  // per dimension: the smallest maxComputeWorkGroupCount allowed

// Weights per 16-byte (uvec4) word of a stored W row, the unit every linear kernel reads.
uint32_t weights_per_word(DType t) { return is_quantized(t) ? 16 : 16 / dtype_bytes(t); }

// The shader that holds W's kernels: shaders/linear.comp (f32 / f16 / bf16) or
// shaders/linear_q.comp (Q8_0 / Q4_0 blocks), which share their kernels' names, bindings,
// constants and launch shapes, so one choice below serves both.
std::string family(DType t) { return is_quantized(t) ? "linear_q." : "linear."; }

// Rates below are from lavapipe (Mesa 22.3, LLVM 15, 8-wide AVX2) on this project's
// 2-core test machine, per CPU-second; tests/test_linear.cpp (GPTVK_LINEAR_BENCH=1) reprints them.

Kernel mat_vec(const vk::Context& ctx, DType dtype, uint32_t K, bool wide, bool texel, bool norm_before) {
  const auto& caps = ctx.caps();
  Kernel k;
  k.kind = LinearKernel::MatVec;
  k.shader = family(dtype) + (caps.subgroup_arithmetic ? "matvec_subgroup" : "matvec_shared");
  if (texel) k.shader += "_texel";
  k.texel = texel;
  k.norm_before_variant = !texel && !is_quantized(dtype);
  uint32_t rows;
  if (ctx.cpu_kernels() && !wide) {
    // One SIMD vector per workgroup (more invocations add no parallelism on lavapipe), 16
    // rows per workgroup so one load of x serves 16 rows of W: 3.6 GB/s of f16 weights,
    // against 4.4 GB/s for a kernel that only loads W (loads are the bound, not math).
    k.local = std::clamp<uint32_t>(caps.subgroup_size, 4, 16);
    rows = 16;
  } else {
    // GPUs: 256 invocations split the input dimension (adjacent invocations read adjacent
    // 16-byte words: coalesced), 2 rows per workgroup: many workgroups, each row's loads all
    // in flight at once. GPT-2 XL f16 decode on an H100, tok/s (invocations x rows): 256 x 2
    // 345, 256 x 1 309, 512 x 2 308, 1024 x 2 233; in an earlier run (then 294 for 128 x 4)
    // 256 x 2 beat 256 x 4 by 2%, 128 x 2 by 8%, 64 x 4 (the old choice) by 46%.
    // With a LayerNorm folded in, each workgroup also reads gamma and reduces two more
    // sums, which more rows share, and fewer invocations do more of the row each: GPT-2 XL
    // f16 decode, two runs each, 128 x 4 386-389 tok/s, 128 x 8 387, 64 x 4 385-387,
    // 64 x 8 356-358, 256 x 4 359-375 (256 x 2 368, 256 x 8 351, 256 x 1 336); the plain
    // mat-vec at 128 x 4 or 128 x 2 lost 1-5% against its 256 x 2.
    k.local = norm_before ? 128 : 256;
    rows = norm_before ? 4 : 2;
    if (is_quantized(dtype)) {
      // Q8_0 / Q4_0 lanes split a row by blocks of 32 weights: as many lanes as a row has
      // blocks (GPT-2 XL's 1600 inputs make 50, which 256 lanes would mostly leave idle),
      // and more rows per workgroup where the lanes are fewer, so each lane's 32 inputs
      // serve more rows. Not yet measured on a GPU (issue 35).
      k.local = std::clamp<uint32_t>(std::bit_ceil(K / kQuantBlock), 32, 256);
      rows = std::clamp<uint32_t>(512 / k.local, 2, 16);
    }
  }
  k.local = std::min(k.local, caps.max_workgroup_invocations);  // stays a power of two
  k.tile = {rows};
  k.outputs_per_group = rows;
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

// A workgroup of the row mat-vec takes at least 8 rows of 4 invocations (one_subgroup_shuffles).
uint64_t pick_partials_bytes(uint32_t rows) { return (uint64_t(rows) / 32 + 1) * 8; }

bool norm_before_fits(const Matrix& W, uint32_t T) {
  return T == 1 && !is_quantized(W.dtype) && W.cols % weights_per_word(W.dtype) == 0;
}

bool held_x_fits(uint32_t K, DType dtype) {
  return K <= kMaxHeldInputs && K % weights_per_word(dtype) == 0;
}

bool column_split_fits(const vk::Context& ctx, uint32_t K, DType dtype) {
  const uint32_t local = ctx.caps().subgroup_size;
  if (local == 0) return false;
  // Lanes split a row by words of W, or by whole blocks of 32 weights (8 texels of x each).
  const uint32_t per_unit = is_quantized(dtype) ? kQuantBlock : weights_per_word(dtype);
  const uint64_t units = (uint64_t(K) + per_unit - 1) / per_unit, units_per_lane = (units + local - 1) / local;
  return units_per_lane * (per_unit / 4) <= kMaxColumnSplitTexels;
}

namespace {

// Decode on CPU devices: shaders/common/linear_matvec_rows.glsl. 16 rows per invocation
// where the matrix still gives every CPU thread (lavapipe runs one per core) two workgroups
// or more, else 8. GPT-2 small on lavapipe, 2 threads, the same minutes: f16 decode
// 53.5-56.5 -> 55.5-60.1 tok/s with 16 (each of 5 pairs), bf16 +3%, medium +1-2%; 32 rows
// 10% slower. (Before the yielding waits made dispatches cheap, 8 rows were as fast:
// fc 10.2 GB/s against 9.8 with 4 rows and 8.1 with 2.)
// `held`: x fetched once per workgroup into a private array (K <= kMaxHeldInputs), not
// once per row (shaders/common/linear_matvec_rows.glsl, X_HELD).
Kernel mat_vec_rows(const vk::Context& ctx, DType dtype, uint32_t rows, bool held) {
  Kernel k;
  k.kind = LinearKernel::MatVec;  // same grid as the mat-vec: x over outputs, y over tokens
  k.shader = family(dtype) + (held ? "matvec_rows_held" : "matvec_rows");
  k.texel = k.x_texel = true;
  k.norm_variant = k.pick_variant = ctx.caps().subgroup_arithmetic;
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
// as the row kernel (16 groups of LOCAL rows measured best here too: GPT-2 small bf16 decode
// 72-73 / 80-83 / 87-89 / 83-84 tok/s with 4 / 8 / 16 / 32).
Kernel mat_vec_cols(const vk::Context& ctx, DType dtype, uint32_t rows) {
  Kernel k = mat_vec_rows(ctx, dtype, rows, false);
  k.shader = family(dtype) + "matvec_cols";
  return k;
}

// The row kernel over several tokens at once (LinearKernel::MatVecRowsBatch): its tokens
// spread over workgroups of up to kRowsBatchTokens.
Kernel mat_vec_rows_batch(const vk::Context& ctx, uint32_t rows, uint32_t T) {
  Kernel k = mat_vec_rows(ctx, DType::F16, rows, false);
  k.kind = LinearKernel::MatVecRowsBatch;
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
  k.kind = LinearKernel::GemmRegisters;
  // With subgroups, the broadcast kernel: 17 GFLOP/s (f16 and f32) against 13-15 GFLOP/s
  // for the best plain register tiles. It needs subgroupShuffle; GPUs never get here
  // unless a test forces this kernel.
  // Weights through texel views: 46 GFLOP/s; inputs too: 55.
  if (ctx.cpu_kernels() && caps.subgroup_arithmetic && one_subgroup_shuffles(ctx)) {
    k.shader = family(dtype) + "gemm_bcast";
    if (w_texel) {
      k.shader += "_texel";
      k.texel = true;
      k.x_texel = x_texel;
      if (x_texel) k.shader += "_x";
    }
    k.local = caps.subgroup_size;
    // Tokens per invocation (xt) x outputs per invocation (tn). f32 words hold half as many
    // weights, so two tokens of four outputs each fit the registers. With 16-bit weights,
    // 2 x 3 does fewer instructions per multiply-add than 1 x 4 (each decoded weight serves
    // 16 tokens, not 8, for 3 outputs' worth of fetched and decoded weights): GPT-2 small on
    // lavapipe, 128-token prompt, medians of 4 alternating pairs: f16 351 -> 389 tok/s,
    // bf16 385 -> 412; medium f16 107 -> 114; 64 and 96 tokens +7-8%. Short chunks lose:
    // 40 tokens (48 computed) 5-25% slower, 20 tokens (32) 25%. Other tiles at 128 tokens,
    // f16: 2 x 2 334-354, 2 x 4 300, 3 x 2 314, 3 x 3 251 (the JIT spills accumulators
    // beyond the CPU's 32 vector registers inside the inner loop).
    const bool wide = dtype != DType::F32 && wide_tile;
    const uint32_t xt = dtype == DType::F32 || wide ? 2 : 1, tn = wide ? 3 : 4;
    k.tile = {xt, tn};
    k.tokens_per_group = xt * k.local;
    k.outputs_per_group = k.local * tn;
    return k;
  }
  // 8 tokens x 8 outputs per invocation: 11 GFLOP/s (8 x 16: 13 GFLOP/s but twice the
  // compile time, for a path only CPU devices without subgroups take). The quantized one
  // has a texel variant.
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
  // The first that fits shared memory ((bm + bn) * bk floats) and the workgroup limit.
  // GPT-2 XL, 128-token prompt on an H100 (tok/s): 64 x 64 tiles of 4 x 4 per invocation
  // 2384, 32 x 32 2044, 64 x 64 of 8 x 8 745, 128 x 128 of 8 x 8 627 (50 workgroups for the
  // MLP: most of the 132 multiprocessors idle).
  const Tiles options[] = {{64, 64, 16, 4, 4}, {64, 64, 16, 8, 8}, {32, 32, 8, 4, 4}};
  for (const auto& t : options) {
    uint32_t local = (t.bm / t.tm) * (t.bn / t.tn);
    uint64_t shared = uint64_t(t.bm + t.bn) * t.bk * 4;
    if (shared > caps.shared_memory_bytes || local > caps.max_workgroup_invocations) continue;
    Kernel k;
    k.kind = LinearKernel::GemmTiled;
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
  const auto tiles = !coopmat_available(ctx, W.dtype) ? std::nullopt
                     : forced                         ? std::optional<CoopMatTiles>(*forced)
                                                      : coopmat_tiles(ctx, T);
  if (!tiles) throw DeviceError("linear: the cooperative-matrix GEMM needs f16 weights and a device with matrix units");
  Kernel k;
  k.kind = LinearKernel::GemmCoopMat;
  k.shader = tiles->shader;
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

LinearKernel auto_kernel(const vk::Context& ctx, uint32_t T, const Matrix& W, View x) {
  const uint32_t K = W.cols;
  const bool w_texel = W.has_texel_views(), x_texel = x_texel_ok(x, K);
  // CPU devices read through texel views where they can: decode with rows per invocation
  // (both views), else the split-K texel mat-vec (W's view only: f32 1.7x, f16 1.3x over
  // storage loads on GPT-2's MLP shapes).
  if (T == 1 && ctx.cpu_kernels())
    return !(w_texel && x_texel && one_subgroup_shuffles(ctx)) ? (w_texel ? LinearKernel::MatVecTexel : LinearKernel::MatVec)
           : ctx.caps().column_split_matvec && column_split_fits(ctx, K, W.dtype) ? LinearKernel::MatVecCols
           : held_x_fits(K, W.dtype)                                            ? LinearKernel::MatVecRowsHeld
                                                                                 : LinearKernel::MatVecRows;
  if (T == 1) return LinearKernel::MatVec;
  if (!ctx.cpu_kernels())
    return coopmat_available(ctx, W.dtype) && coopmat_tiles(ctx, T) ? LinearKernel::GemmCoopMat
                                                                             : LinearKernel::GemmTiled;
  // The wide tile takes 2 tokens per lane (gemm_registers): 16-bit weights' chunks that it
  // fills exactly take it at any length (kWideTileMinTokens; measured, and checked
  // bit-identical to the row mat-vec, for those weights only).
  const uint32_t wide_tokens = 2 * std::max(ctx.caps().subgroup_size, 1u);
  const bool whole_wide_groups = !is_quantized(W.dtype) && T % wide_tokens == 0;
  return T >= kWideTileMinTokens || whole_wide_groups ? LinearKernel::GemmRegistersWide : LinearKernel::GemmRegisters;
}

namespace {

Kernel choose(const vk::Context& ctx, LinearKernel want, uint32_t T, const Matrix& W, View x, bool norm_before,
              const CoopMatTiles* coopmat) {
  const uint32_t K = W.cols;
  if (is_quantized(W.dtype) && K % kQuantBlock != 0)
    throw std::logic_error(std::string("linear: ") + dtype_name(W.dtype) + " weights with " + std::to_string(K) + " columns");
  if (is_quantized(W.dtype) && want == LinearKernel::MatVecRowsBatch)
    throw DeviceError(std::string("linear: ") + dtype_name(W.dtype) + " weights have no batched row mat-vec");
  const bool w_texel = W.has_texel_views(), x_texel = x_texel_ok(x, K);
  if (want == LinearKernel::Auto && norm_before) want = LinearKernel::MatVec;  // the one kernel with it
  if (want == LinearKernel::Auto) want = auto_kernel(ctx, T, W, x);
  const bool rows = want == LinearKernel::MatVecRows || want == LinearKernel::MatVecRowsHeld ||
                    want == LinearKernel::MatVecCols || want == LinearKernel::MatVecRowsBatch;
  if ((want == LinearKernel::MatVecTexel || rows) && !w_texel)
    throw DeviceError("linear: the texel mat-vec needs W with texel views, which this device cannot make");
  if (rows && !(x_texel && one_subgroup_shuffles(ctx)))
    throw DeviceError("linear: the row mat-vec needs x with a 16-byte aligned texel view and subgroup shuffles");
  if (want == LinearKernel::MatVecRowsHeld && !held_x_fits(W.cols, W.dtype))
    throw std::invalid_argument("linear: the held-x row mat-vec takes at most " + std::to_string(kMaxHeldInputs) +
                                " inputs in whole weight words, not " + std::to_string(K));
  if (want == LinearKernel::MatVecCols && !column_split_fits(ctx, K, W.dtype))
    throw std::invalid_argument("linear: the column-split mat-vec holds at most " +
                                std::to_string(kMaxColumnSplitTexels) + " texels of x per lane, " +
                                std::to_string(K) + " inputs need more");
  const DType dt = W.dtype;
  Kernel k = want == LinearKernel::MatVec          ? mat_vec(ctx, dt, K, false, false, norm_before)
             : want == LinearKernel::MatVecWide    ? mat_vec(ctx, dt, K, true, false, norm_before)
             : want == LinearKernel::MatVecTexel   ? mat_vec(ctx, dt, K, false, true, false)
             : want == LinearKernel::MatVecCols    ? mat_vec_cols(ctx, dt, W.rows)
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

View sub_view(View v, uint64_t offset, uint64_t bytes) { return View{v.buffer, v.offset + offset, bytes}; }

// Whether the first a_bytes of view a and the first b_bytes of view b share memory.
bool overlaps(View a, uint64_t a_bytes, View b, uint64_t b_bytes) {
  return a.buffer == b.buffer && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

// linear.comp's constants 0-6 (common/linear_io.glsl): workgroup size, inputs, W's row
// length in words, its dtype, and the epilogue; a kernel's tile sizes follow from 7.
std::vector<uint32_t> io_constants(uint32_t local, const Matrix& W, Activation act, bool has_bias, uint32_t res_mode) {
  return {local, W.cols, static_cast<uint32_t>(W.row_bytes() / 16), static_cast<uint32_t>(W.dtype),
          static_cast<uint32_t>(act), has_bias ? 1u : 0u, res_mode};
}

// The row scales of f16 rows first..first + n - 1 (binding 5); other dtypes have none and
// bind `unused`, a range the dispatch reads anyway.
View row_scales(const Matrix& W, uint64_t first, uint64_t n, View unused) {
  return W.dtype == DType::F16 ? View{&W.row_scales, first * 4, n * 4} : unused;
}

// How many ways the tiled GEMM splits its inputs (split-K): a product of fewer tiles than
// kFewTiles gets enough splits to make about that many workgroups, each with at least 8
// steps of BK inputs, at most 8 splits. GPUs leave most multiprocessors idle otherwise: an
// H100 has 132, and GPT-2 XL's 128-token prompt makes 50 tiles of its 1600-output products.
// Prefill tok/s on an H100 (128-token prompt, one run, base / kFewTiles 160 / 264): GPT-2
// small 20084 / 49845 / 51872, XL 2385 / 4365 / 4536; XL 960-token prompt 3309 / 4013 /
// 4069. Decode is unchanged (one token: mat-vecs).
uint32_t split_k(const Kernel& k, uint32_t T, uint32_t N, uint32_t K) {
  constexpr uint64_t kFewTiles = 264;  // two workgroups per multiprocessor of an H100
  const uint32_t bm = k.tile[0], bn = k.tile[1], bk = k.tile[2];
  const uint64_t tiles = uint64_t((T + bm - 1) / bm) * ((N + bn - 1) / bn);
  if (tiles >= kFewTiles) return 1;
  const uint64_t want = (kFewTiles + tiles - 1) / tiles;
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>({want, K / (8ull * bk), 8})));
}

// The tiled GEMM split `splits` ways over K: partial sums into the graph's scratch
// ([splits][T][N] floats), then split_sum adds them up with the epilogue (bias, activation,
// residual r per res_mode) into y. One dispatch each; the caller has checked that x, y and
// W are each one binding.
void add_split_k(Graph& g, const Kernel& k, uint32_t splits, View x, const Matrix& W, View bias, View y, View r,
                 uint32_t T, uint32_t res_mode, Activation act, const std::string& name) {
  vk::Context& ctx = g.context();
  const uint32_t N = W.rows;
  const View w{&W.chunks[0], 0, uint64_t(N) * W.row_bytes()};
  const View row_scale = row_scales(W, 0, N, w);
  const View partials = g.scratch(uint64_t(splits) * T * N * 4);
  std::vector<uint32_t> spec = io_constants(k.local, W, Activation::None, false, 0);  // no epilogue yet
  spec.insert(spec.end(), k.tile.begin(), k.tile.end());
  spec.push_back(splits);
  spec.insert(spec.end(), k.after_split.begin(), k.after_split.end());
  const auto& gemm = ctx.pipelines().get({k.shader, spec, 6, 12, 0});
  g.add({name, &gemm,
         {{x, Access::Read}, {w, Access::Read}, {w, Access::Read}, {x, Access::Read}, {partials, Access::Write},
          {row_scale, Access::Read}},
         {(T + k.tokens_per_group - 1) / k.tokens_per_group, (N + k.outputs_per_group - 1) / k.outputs_per_group, splits},
         {T, N, N},
         w.bytes,
         2ull * T * N * W.cols});
  constexpr uint32_t local = 64;
  const bool has_bias = bias.buffer != nullptr;
  std::vector<uint32_t> sum_spec = io_constants(local, W, act, has_bias, res_mode);
  sum_spec.push_back(splits);
  const auto& sum = ctx.pipelines().get({"linear.split_sum", sum_spec, 6, 12, 0});
  g.add({name + ".sum", &sum,
         {{partials, Access::Read},
          {w, Access::Read},
          {has_bias ? bias : w, Access::Read},
          {res_mode == 1 ? r : partials, Access::Read},
          {y, res_mode == 2 ? Access::ReadWrite : Access::Write},
          {row_scale, Access::Read}},
         {(N + local - 1) / local, T, 1},
         {T, N, N}});
}

}  // namespace

void linear(Graph& g, View x, const Matrix& W, View bias, View y, uint32_t T, LinearEpilogue ep, View r,
            const std::string& name, const NormAfter* norm) {
  linear_with(g, x, W, bias, y, T, {.ep = ep, .r = r, .name = name, .norm_after = norm});
}

namespace {

// Checks x, y, bias and the optional views against T, W and each other (std::invalid_argument
// naming `args.name` otherwise); returns whether the residual is y itself (added in place).
bool check_linear_args(View x, const Matrix& W, View bias, View y, uint32_t T, const LinearArgs& args) {
  const std::string& name = args.name;
  const NormAfter* norm = args.norm_after;
  const PickAfter* pick = args.pick_after;
  const NormBefore* norm_before = args.norm_before;
  const uint32_t K = W.cols, N = W.rows;
  if (norm && pick) throw std::invalid_argument(name + ": a LayerNorm and a pick after the same linear");
  if (norm_before && (norm || pick))
    throw std::invalid_argument(name + ": a LayerNorm before the linear and a LayerNorm or pick after it");
  if (norm_before && !norm_before_fits(W, T))
    throw std::invalid_argument(name + ": a LayerNorm folded into the linear needs one token and whole weight words");
  if (norm_before && (norm_before->gamma.size() < uint64_t(K) * 4 || norm_before->row_gamma.size() < uint64_t(N) * 4 ||
                      norm_before->gamma.offset % 16 != 0))
    throw std::invalid_argument(name + ": gamma (16-byte aligned, [in]) or row_gamma ([out]) is too small");
  if (K == 0) throw std::invalid_argument(name + ": weight matrix has no columns");
  const uint64_t x_row = uint64_t(K) * 4, y_row = uint64_t(N) * 4;
  if (!x.buffer || !y.buffer || x.size() < T * x_row || y.size() < T * y_row)
    throw std::invalid_argument(name + ": x or y is smaller than [T][in] / [T][out]");
  if (bias.buffer != nullptr && bias.size() < y_row) throw std::invalid_argument(name + ": bias is smaller than [out]");
  // Workgroups write y while others still read x (and r, unless r is y itself).
  if (overlaps(x, T * x_row, y, T * y_row)) throw std::invalid_argument(name + ": x overlaps y");
  bool in_place = false;
  if (args.ep.residual) {
    const View r = args.r;
    if (!r.buffer || r.size() < T * y_row) throw std::invalid_argument(name + ": residual is smaller than [T][out]");
    in_place = r.buffer == y.buffer && r.offset == y.offset;
    if (!in_place && overlaps(r, T * y_row, y, T * y_row))
      throw std::invalid_argument(name + ": residual partly overlaps y");
  }
  return in_place;
}

// How one linear_with call splits into dispatches, and which variant of its kernel they run.
struct LinearLayout {
  Kernel kernel;
  uint64_t x_row = 0, y_row = 0;  // bytes of one token's x / y row
  uint64_t t_block = 0;           // tokens per dispatch
  uint32_t o_block = 0;           // outputs per dispatch within a chunk
  bool has_bias = false, in_place = false, fuse_norm = false, fuse_pick = false;
  uint32_t res_mode = 0;          // linear.comp's: 0 none, 1 r separate, 2 r is y
  std::string variant;            // "", "_ln", "_pick" or "_lnin"
  uint32_t bindings = 6;
};

// Token blocks: x, y and r bindings stay within the storage buffer range, and each block
// starts at an offset both x and y rows keep aligned. Output blocks within a chunk: at most
// kMaxGroups workgroups, starting on a multiple of kChunkRowAlign rows so that every column
// offset stays aligned.
void choose_blocks(const vk::Context& ctx, LinearLayout& l, uint32_t T, uint32_t N, const std::string& name) {
  const auto& caps = ctx.caps();
  const bool mat_vec = l.kernel.kind == LinearKernel::MatVec;
  const uint64_t align = caps.storage_offset_alignment;
  const uint64_t step = std::lcm(align / std::gcd(align, l.x_row), align / std::gcd(align, l.y_row));
  uint64_t t_block = caps.max_storage_buffer_range / std::max(l.x_row, l.y_row);
  t_block = std::min<uint64_t>(t_block, uint64_t(kMaxGroups) * (mat_vec ? 1 : l.kernel.tokens_per_group));
  if (t_block < T) t_block = t_block / step * step;
  if (t_block == 0)
    throw DeviceError(name + ": one token row (" + std::to_string(std::max(l.x_row, l.y_row)) +
                      " bytes) does not fit the device's storage buffer range");
  l.t_block = t_block;
  const uint64_t max_groups_rows = uint64_t(kMaxGroups) * l.kernel.outputs_per_group;
  l.o_block = static_cast<uint32_t>(std::min<uint64_t>(max_groups_rows / kChunkRowAlign * kChunkRowAlign, N));
}

// The LayerNorm after, or the greedy pick, rides along when one mat-vec dispatch computes
// the whole row (the caller samples otherwise); sets the variant and its binding count.
void choose_fusions(LinearLayout& l, const Matrix& W, uint32_t T, const LinearArgs& args) {
  const NormAfter* norm = args.norm_after;
  const PickAfter* pick = args.pick_after;
  const uint32_t N = W.rows;
  const bool one_dispatch = T == 1 && W.chunks.size() == 1 && N <= l.o_block;
  l.fuse_norm = norm && l.kernel.norm_variant && one_dispatch;
  if (norm && norm->counter.size() < 4) throw std::invalid_argument(args.name + ": LayerNorm counter is smaller than a uint");
  l.fuse_pick = pick && l.kernel.pick_variant && one_dispatch;
  if (l.fuse_pick && (pick->counter.size() < 4 || pick->ids.size() < 4 || pick->step.size() < sizeof(StepState) ||
                      pick->partials.size() < pick_partials_bytes(N)))
    throw std::invalid_argument(args.name + ": a pick view (counter, ids, step or partials) is too small");
  const bool norm_before = args.norm_before != nullptr;
  l.variant = l.fuse_norm ? "_ln" : l.fuse_pick ? "_pick" : norm_before ? "_lnin" : "";
  l.bindings = l.fuse_norm || l.fuse_pick ? 10u : norm_before ? 8u : 6u;
}

// One dispatch of a linear: tokens [t0, t0 + tn) of x, rows [r0, r0 + nr) of chunk c of W.
void add_linear_block(Graph& g, const LinearLayout& l, View x, const Matrix& W, View bias, View y, uint32_t T,
                      const LinearArgs& args, uint32_t t0, uint32_t tn, size_t c, uint32_t r0, uint32_t nr) {
  const Kernel& kernel = l.kernel;
  const NormAfter* norm = args.norm_after;
  const PickAfter* pick = args.pick_after;
  const NormBefore* norm_before = args.norm_before;
  const uint32_t N = W.rows;
  const View xb = sub_view(x, t0 * l.x_row, tn * l.x_row);
  const uint64_t col = uint64_t(c) * W.rows_per_chunk + r0;  // first output column
  // y, r and bias views start at (t0, col); y rows keep their full stride N.
  const uint64_t out_offset = t0 * l.y_row + col * 4, out_bytes = (uint64_t(tn - 1) * N + nr) * 4;
  const View wb{&W.chunks[c], uint64_t(r0) * W.row_bytes(), uint64_t(nr) * W.row_bytes()};
  // The texel kernel sees the whole chunk through its view and starts at texel w_base;
  // wb's range still tells the graph which bytes it reads.
  View wt = wb;
  if (kernel.texel) wt.texel = W.chunks[c].texel_view();
  const View yb = sub_view(y, out_offset, out_bytes);
  // Unused bindings get a range this dispatch reads anyway, so they add no hazards.
  const View bb = l.has_bias ? sub_view(bias, col * 4, uint64_t(nr) * 4) : wb;
  const View rb = l.res_mode == 1 ? sub_view(args.r, out_offset, out_bytes) : xb;
  const View sb = row_scales(W, col, nr, wb);

  std::vector<uint32_t> spec = io_constants(kernel.local, W, args.ep.act, l.has_bias, l.res_mode);
  spec.insert(spec.end(), kernel.tile.begin(), kernel.tile.end());
  if (!kernel.after_split.empty()) {
    spec.push_back(1);  // no split-K
    spec.insert(spec.end(), kernel.after_split.begin(), kernel.after_split.end());
  }
  if (l.fuse_norm) spec.push_back(vk::spec_f32(norm->eps));
  if (norm_before) spec.push_back(vk::spec_f32(norm_before->eps));
  const uint32_t push_bytes = 12u + (kernel.texel ? 4u : 0u) + (kernel.x_texel ? 4u : 0u);
  const uint32_t texel_bindings = (kernel.x_texel ? 1u << 0 : 0u) | (kernel.texel ? 1u << 1 : 0u);
  const auto& pipeline =
      g.context().pipelines().get({kernel.shader + l.variant, spec, l.bindings, push_bytes, texel_bindings});
  std::vector<uint32_t> push = {tn, nr, N};
  if (kernel.texel) push.push_back(static_cast<uint32_t>(uint64_t(r0) * W.row_bytes() / 16));
  // The x texel view covers x's whole buffer; the kernel starts at texel x_base.
  View xv = xb;
  if (kernel.x_texel) {
    xv.texel = x.buffer->texel_view();
    push.push_back(static_cast<uint32_t>(xb.offset / 16));
  }

  const uint32_t out_groups = (nr + kernel.outputs_per_group - 1) / kernel.outputs_per_group;
  std::array<uint32_t, 3> groups{};
  if (kernel.kind == LinearKernel::MatVec)
    groups = {out_groups, tn, 1};
  else if (kernel.kind == LinearKernel::MatVecRowsBatch)  // x over outputs, y over token groups
    groups = {out_groups, (tn + kernel.tokens_per_group - 1) / kernel.tokens_per_group, 1};
  else
    groups = {(tn + kernel.tokens_per_group - 1) / kernel.tokens_per_group, out_groups, 1};
  std::string label = args.name;
  if (W.chunks.size() > 1 || T > l.t_block || W.chunk_rows(c) > l.o_block)
    label += "[t" + std::to_string(t0) + ",o" + std::to_string(col) + "]";
  std::vector<Arg> bound = {{xv, Access::Read},
                            {wt, Access::Read},
                            {bb, Access::Read},
                            {rb, Access::Read},
                            // fused norm: the last workgroup reads the whole row back
                            {yb, l.in_place || l.fuse_norm ? Access::ReadWrite : Access::Write},
                            {sb, Access::Read}};
  if (l.fuse_norm) {
    bound.push_back({norm->gamma, Access::Read});
    bound.push_back({norm->beta, Access::Read});
    bound.push_back({norm->out, Access::Write});
    bound.push_back({norm->counter, Access::ReadWrite});
  }
  if (norm_before) {
    bound.push_back({norm_before->gamma, Access::Read});
    bound.push_back({sub_view(norm_before->row_gamma, col * 4, uint64_t(nr) * 4), Access::Read});
  }
  if (l.fuse_pick) {
    bound.push_back({pick->ids, Access::Write});
    bound.push_back({pick->step, Access::ReadWrite});
    bound.push_back({pick->partials, Access::ReadWrite});
    bound.push_back({pick->counter, Access::ReadWrite});
  }
  const uint64_t weight_bytes = wb.bytes + (sb.buffer == wb.buffer && sb.offset == wb.offset ? 0 : sb.size());
  g.add({label, &pipeline, std::move(bound), groups, push, weight_bytes, 2ull * tn * nr * W.cols});
}

}  // namespace

bool linear_with(Graph& g, View x, const Matrix& W, View bias, View y, uint32_t T, const LinearArgs& args) {
  const uint32_t K = W.cols, N = W.rows;
  if (T == 0 || N == 0) return false;
  LinearLayout l;
  l.in_place = check_linear_args(x, W, bias, y, T, args);
  l.x_row = uint64_t(K) * 4;
  l.y_row = uint64_t(N) * 4;
  l.has_bias = bias.buffer != nullptr;

  vk::Context& ctx = g.context();
  l.kernel = choose(ctx, args.kernel, T, W, x, args.norm_before != nullptr, args.coopmat_tiles);
  if (args.norm_before && !l.kernel.norm_before_variant)
    throw DeviceError(args.name + ": only the storage-buffer mat-vec folds a LayerNorm in");
  choose_blocks(ctx, l, T, N, args.name);
  choose_fusions(l, W, T, args);
  l.res_mode = !args.ep.residual ? 0 : l.in_place ? 2 : 1;

  // GPUs: a tiled GEMM of few tiles splits its inputs, where x, y, W and the partial sums
  // are each one binding.
  const bool tiles = l.kernel.kind == LinearKernel::GemmTiled || l.kernel.kind == LinearKernel::GemmCoopMat;
  const uint32_t splits = tiles && !ctx.cpu_kernels() && W.chunks.size() == 1 &&
                                  T <= l.t_block && N <= l.o_block
                              ? split_k(l.kernel, T, N, K)
                              : 1;
  const NormAfter* norm = args.norm_after;
  if (splits > 1 && uint64_t(splits) * T * N * 4 <= ctx.caps().max_storage_buffer_range) {
    add_split_k(g, l.kernel, splits, sub_view(x, 0, T * l.x_row), W, l.has_bias ? sub_view(bias, 0, l.y_row) : View{},
                sub_view(y, 0, T * l.y_row), l.res_mode == 1 ? sub_view(args.r, 0, T * l.y_row) : View{}, T, l.res_mode,
                args.ep.act, args.name);
    if (norm) layernorm(g, y, norm->gamma, norm->beta, norm->out, T, N, norm->eps, norm->name);
    return false;
  }
  for (uint32_t t0 = 0; t0 < T; t0 += static_cast<uint32_t>(l.t_block)) {
    const uint32_t tn = static_cast<uint32_t>(std::min<uint64_t>(l.t_block, T - t0));
    for (size_t c = 0; c < W.chunks.size(); ++c)
      for (uint32_t r0 = 0; r0 < W.chunk_rows(c); r0 += l.o_block)
        add_linear_block(g, l, x, W, bias, y, T, args, t0, tn, c, r0, std::min(l.o_block, W.chunk_rows(c) - r0));
  }
  if (norm && !l.fuse_norm) layernorm(g, y, norm->gamma, norm->beta, norm->out, T, N, norm->eps, norm->name);
  return l.fuse_pick;
}

}  // namespace gptvk::ops
