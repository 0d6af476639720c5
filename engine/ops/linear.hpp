// Linear layer y = r + act(x W^T + b) with bias, activation and residual add fused into
// one dispatch per weight chunk (and per token block when x or y exceeds one binding).
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/activation.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "engine/tensor.hpp"

namespace gptvk::ops {

struct LinearEpilogue {
  Activation act = Activation::None;  // fused after the bias
  bool residual = false;              // y = r + act(x W^T + b): the residual add fused in
};

// Optionally, a LayerNorm of y's rows into `out` (gamma, beta: W.rows floats): for a single
// token on CPU devices the mat-vec's last workgroup computes it in the same dispatch (which
// counts its finished workgroups in `counter`, one uint that must start at 0 and is left at
// 0); otherwise linear() adds a LayerNorm dispatch named `name`.
struct NormAfter {
  View gamma, beta, out, counter;
  float eps = 1e-5f;
  std::string name = "layernorm";
};

// Optionally, for a single token, the greedy pick of y (what ops::sample does at temperature
// 0: ids[0] = the lowest index of the largest output, and the step's pos and rng advance by
// one), done by the mat-vec's last workgroup on CPU devices. `partials`: at least
// pick_partials_bytes(W.rows) bytes; `counter`: one uint that must start at 0 and is left at 0.
// linear_with() returns whether it added the pick; where it did not (GPU kernels, more than
// one dispatch) the caller samples.
struct PickAfter {
  View ids, step, partials, counter;
};
uint64_t pick_partials_bytes(uint32_t rows);

// Optionally, the LayerNorm of x folded into the mat-vec that reads it (pre-LN blocks on
// GPUs, one token), where it saves the LayerNorm its dispatch:
//   y = W LN(x) + b = rstd * (W (gamma * x) - mean * row_gamma) + shift,
// with row_gamma = W gamma (W.rows floats) and shift = W beta + b, the linear's bias view,
// both computed once from the weights (by this op: linear(gamma) and linear(beta, bias b)).
// gamma: K floats. Only the (storage-buffer) MatVec kernel has it, for float weights and K
// a multiple of the weights per uvec4 word (norm_before_fits); elsewhere linear_with throws.
// Over T tokens each token's workgroups take its own statistics: every row of y is what
// the one-token product gives for that token, bit for bit (a GPU's batched decode step).
struct NormBefore {
  View gamma, row_gamma;
  float eps = 1e-5f;
};
bool norm_before_fits(const Matrix& W);

// y[t][o] = (residual ? r[t][o] : 0) + act(sum_i x[t][i] * W[o][i] + bias[o]) for t < T, o < W.rows.
// x: f32 [T][W.cols]; y: f32 [T][W.rows]; bias: f32 [W.rows] or bias.buffer == nullptr for none;
// r: f32 [T][W.rows] (may be the same view as y) when ep.residual. W: Matrix in f32/f16/bf16.
// x must not overlap y. View offsets must be multiples of the device's storage_offset_alignment.
// Adds one dispatch per chunk of W, and per block of tokens when x or y is larger than the
// device's storage buffer range.
void linear(Graph& g, View x, const Matrix& W, View bias, View y, uint32_t T, LinearEpilogue ep = {}, View r = {},
            const std::string& name = "linear", const NormAfter* norm = nullptr);

// The kernels linear() chooses between. Auto: mat-vec for T == 1; for T > 1 the
// register-blocked GEMM on CPU devices (lavapipe) and the shared-memory tiled GEMM on GPUs.
// Forcing one lets tests run every kernel on every device; each handles any T.
// MatVecWide is the mat-vec as configured for GPUs (256 invocations: several subgroups
// whose partial sums meet in shared memory), which Auto never picks on a CPU device.
// MatVecTexel is the CPU mat-vec reading W through uniform texel buffers (Matrix texel
// views), which lavapipe fetches vectorised; Auto picks it for T == 1 on CPU devices when W
// has texel views. Forcing it on a W without them throws DeviceError.
// MatVecRows is the CPU mat-vec with rows per invocation, reading W and x through texel
// views (x's buffer needs one: Buffer::try_create_texel_view); Auto picks it for T == 1 on
// CPU devices when both views exist and the device has subgroup shuffles. Forcing it
// without them throws DeviceError. MatVecRowsHeld is the same kernel fetching x once per
// workgroup instead of once per row, for K <= kMaxHeldInputs in whole weight words (8
// weights, f32 4); Auto prefers it where it applies, forcing it elsewhere throws
// std::invalid_argument. MatVecCols has the same needs as MatVecRows, but its lanes split
// each row's columns, each holding its share of x (column_split_fits); Auto prefers it
// where the device says so (Caps::column_split_matvec) and it fits, forcing it where it
// does not fit throws std::invalid_argument. On CPU devices GemmRegisters reads W, and x,
// through their texel views when they have them; with 16-bit weights Auto gives chunks of
// kWideTileMinTokens or more, or of whole workgroups of it, its wide tile,
// GemmRegistersWide, which can be asked for at any T (the same pipeline for a chunk's last
// row: auto_kernel). GemmCoopMat is the GEMM on matrix units
// (engine/ops/linear_coopmat.hpp): x rounded to f16, f32 sums; Auto picks it over
// GemmTiled on GPUs that have it, for any weights but f32 (bf16 within f16's range, the
// quantized blocks turned into f16 as they are staged); forcing it elsewhere throws
// DeviceError.
// Q8_0 / Q4_0 weights (engine/quant.hpp) take the same kernels from shaders/linear_q.comp,
// chosen the same way, with the weights' blocks decoded in f32 (K a multiple of 32, else
// std::logic_error). They have no NormBefore fusion and no MatVecRowsBatch (DeviceError);
// their GemmRegisters without subgroups reads W's texel views where it has them.
enum class LinearKernel {
  Auto,
  MatVec,
  MatVecWide,
  MatVecTexel,
  MatVecRows,
  MatVecRowsHeld,
  MatVecCols,
  GemmRegisters,
  GemmRegistersWide,
  GemmTiled,
  GemmCoopMat,
  // MatVecRows over several tokens per workgroup (batched decode steps,
  // shaders/common/linear_matvec_rows_batch.glsl): each weight word decoded once for up to
  // kRowsBatchTokens tokens, each token's sum bit-identical to MatVecRows' and
  // MatVecRowsHeld's. Same needs as MatVecRows; never picked by Auto.
  MatVecRowsBatch,
  // MatVecCols over several tokens per workgroup (shaders/common/linear_cols_main.glsl,
  // COLS_BATCH): each weight word (or Q8_0 / Q4_0 block) decoded once for up to
  // kColsBatchTokens tokens whose inputs the lanes hold together (at most kColsBatchTexels
  // texels, so fewer tokens where K is wide), each token's sum bit-identical to
  // MatVecCols'. Same needs as MatVecCols; never picked by Auto.
  MatVecColsBatch
};
constexpr uint32_t kRowsBatchTokens = 16;  // shaders/common/linear_matvec_rows_batch.glsl, NB_MAX
constexpr uint32_t kColsBatchTokens = 16;   // shaders/common/linear_cols_batch.glsl, NB_MAX
constexpr uint32_t kColsBatchTexels = 512;  // the same, XB_MAX
constexpr uint32_t kMaxHeldInputs = 1024;  // shaders/common/linear_rows_held_x.glsl, X_HELD_MAX
// shaders/common/linear_cols_held_x.glsl, XC_MAX
constexpr uint32_t kMaxColumnSplitTexels = 256;
// Chunks of at least this many tokens take the CPU GEMM's wide tile (16-bit weights, two
// tokens per lane: 16 per workgroup on 8 lanes), and so do shorter chunks of 16-bit weights
// that fill its workgroups exactly (16, 32, 48 tokens; batched decode steps of 16 rows):
// there it computes no row it drops. Other short chunks lost on it: it computes rows only
// to drop them, over half as many workgroups (engine/ops/linear_kernels.cpp, gemm_registers).
// Figures: bench/PERFORMANCE.md.
constexpr uint32_t kWideTileMinTokens = 64;

// The kernel Auto picks for T tokens of x through W on this device. A step that runs some
// rows of a chunk again through the kernel of the whole chunk reuses that pipeline instead
// of compiling another (lavapipe compiles each at its first dispatch).
LinearKernel auto_kernel(const vk::Context& ctx, uint32_t T, const Matrix& W, View x);
// Its choice for one token (T = 1) of K inputs over weights of `dtype`, given whether W and
// x can be read through texel views (also what `gpt-vk devices -v` reports).
LinearKernel decode_kernel(const vk::Context& ctx, uint32_t K, DType dtype, bool w_texel, bool x_texel);

// Whether kernel `k`'s last workgroup can also finish the LayerNorm after a residual add
// (ops::NormAfter) or the greedy pick (ops::PickAfter): the row and column-split mat-vecs,
// with subgroup arithmetic.
bool last_workgroup_fusions(const vk::Context& ctx, LinearKernel k);
// Whether the device runs MatVecRows at all: subgroup shuffles on workgroups of one
// subgroup of 4-16 lanes (CPU devices' SIMD vectors; a GPU's 32 or 64 lanes are not).
bool row_matvec_supported(const vk::Context& ctx);
// Whether GemmRegisters and GemmRegistersWide are the CPU devices' broadcast GEMM (inputs
// handed out by subgroup shuffles) in its two tiles; elsewhere both are one plain register tile.
bool broadcast_gemm_supported(const vk::Context& ctx);
// Whether MatVecRowsHeld takes K inputs of this dtype: at most kMaxHeldInputs, whole words.
bool held_x_fits(uint32_t K, DType dtype);
// Whether MatVecCols takes K inputs of this dtype on this device: each lane's share of x
// (its words, or its blocks of 32 for quantized W; LOCAL = subgroup size lanes to a row)
// within kMaxColumnSplitTexels texels.
bool column_split_fits(const vk::Context& ctx, uint32_t K, DType dtype);

// What linear_with takes beyond the product itself, by name (designated initializers):
//   ops::linear_with(g, x, W, bias, y, T, {.ep = {Activation::GeluTanh, true}, .r = y, .name = "fc"});
struct LinearArgs {
  LinearKernel kernel = LinearKernel::Auto;  // forced kernel (tests, the model's shared pipelines)
  LinearEpilogue ep = {};
  View r = {};                               // the residual, with ep.residual
  std::string name = "linear";
  const NormAfter* norm_after = nullptr;     // at most one of these three
  const PickAfter* pick_after = nullptr;
  const NormBefore* norm_before = nullptr;
  const CoopMatTiles* coopmat_tiles = nullptr;  // GemmCoopMat's tiles, not its own choice (micro-benchmarks)
};

// linear() with the optional parts; returns whether it added the pick (args.pick_after).
bool linear_with(Graph& g, View x, const Matrix& W, View bias, View y, uint32_t T, const LinearArgs& args);

}  // namespace gptvk::ops
