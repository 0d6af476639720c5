// The execution plan: what a step does differently by device class (a CPU implementation
// such as lavapipe, or a GPU), decided once from the device and the model's shape, so that
// the model's graph builder (models/gpt_graph.cpp) reads as the transformer and asks the
// plan where the device matters: which fusions and attention paths a step takes, and the
// kernels of its batched and last-row products. For one product alone an op picks its own
// kernel from the device's caps (ops::auto_kernel, ops::attention_kernel), as it picks its
// launch shapes; `gpt-vk devices -v` prints both the plan and those picks.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/attention_coopmat.hpp"
#include "engine/ops/linear.hpp"

namespace gptvk {

namespace vk {
class Context;
}

// What the plan needs to know of the model.
struct PlanModel {
  bool pre_norm = true;        // LayerNorm before each sublayer (GPT-2), else after (GPT-1)
  uint32_t n_layers = 0;
  // Every LayerNorm before a linear (qkv, fc, the LM head) can be folded into that
  // linear's mat-vec: ops::norm_before_fits of each of those matrices.
  bool norms_foldable = false;
  uint32_t max_chunk = 256;    // tokens per prompt chunk
  ops::AttentionShape attention{1, 1, 1};
  // Prompt products that round their inputs to f16 where the device has matrix units
  // (weights of any dtype but f32: ops::coopmat_available), so prompt attention may too.
  bool f16_products = false;
};

struct ExecutionPlan {
  // CPU devices' kernels: texel-view mat-vecs and register-blocked GEMMs, whose last
  // workgroup also finishes the LayerNorm after a residual add (ops::NormAfter) and the
  // greedy pick (ops::PickAfter). Else a GPU's: 256-wide mat-vecs, the tiled GEMM, the
  // wide attention kernel.
  bool cpu_kernels = false;
  // GPUs, pre-LN, one-token steps (and batched steps with exact rows, which follow them):
  // the LayerNorms before qkv, fc and the LM head folded into their mat-vecs
  // (ops::NormBefore), saving a dispatch each (~5 us behind a barrier).
  bool fold_norms = false;
  // CPU devices: prompt chunks of ops::kTiledMinTokens or more run attention as two tiled
  // passes through a scores scratch the model allocates (ops::kv_append_attention_tiled).
  bool tiled_prompt_attention = false;
  // A step that needs only its last position's logits runs the last layer past the KV
  // cache for that row alone. GPUs do it on every chunk, with the one-token kernels; CPU
  // devices only on chunks that take the tiled attention, running the row through the
  // chunk's own pipelines (lavapipe compiles a pipeline at its first dispatch, and the
  // decode step's would add to the time to the first token).
  bool last_row_on_chunk_pipelines = false;
  // GPUs whose prompt products run on matrix units (any weights but f32:
  // ops::coopmat_available): prompt chunks of ops::kCoopMatAttentionMinTokens or more run
  // attention there too, in flash-attention tiles (ops::attention_coopmat), after kv_append.
  bool coopmat_prompt_attention = false;

  // Whether a T-token chunk takes the tiled attention passes.
  bool tiled_attention(uint32_t T) const { return tiled_prompt_attention && T >= ops::kTiledMinTokens; }
  // Whether a T-token chunk takes the matrix units' attention tiles.
  bool coopmat_attention(uint32_t T) const {
    return coopmat_prompt_attention && T >= ops::kCoopMatAttentionMinTokens;
  }
  // Whether a T-token step whose head needs one row computes the last layer for it alone.
  bool last_row_only(uint32_t T) const {
    return T > 1 && (!last_row_on_chunk_pipelines || tiled_attention(T));
  }
  // A batched decode step's products (one row per sequence, models/decode_batch.hpp). With
  // `exact_rows`, every row's sums are those of a sequence decoding alone, bit for bit:
  // where the one-token step takes the row mat-vec (CPU devices), the prompt chunks' CPU
  // GEMM, whose broadcast kernel sums each output in the same order, or for up to 4 rows
  // or without subgroup arithmetic the batched row mat-vec
  // (ops::LinearKernel::MatVecRowsBatch); where it takes the column-split mat-vec, that
  // kernel over several rows (MatVecColsBatch); elsewhere (GPUs among them) the one-token
  // kernel itself over every row (the split-K mat-vec takes up to 8 rows a workgroup, each
  // weight loaded once for them). Without exact rows, the prompt chunks' GEMM as Auto picks
  // it (the tiled or cooperative-matrix GEMM).
  ops::LinearKernel batch_linear_kernel(const vk::Context& ctx, uint32_t rows, bool exact_rows, const Matrix& W,
                                        View x) const;
  // Whether a one-token step computes the LayerNorm after W's product in the mat-vec's last
  // workgroup (ops::NormAfter), whose order a batched step with exact rows then follows
  // (ops::layernorm_in_lanes).
  bool batch_norm_in_lanes(const vk::Context& ctx, const Matrix& W, View x) const;
  // The kernel for `rows` rows of a T-token chunk's product (rows < T: the last row alone).
  ops::LinearKernel linear_kernel(const vk::Context& ctx, uint32_t T, uint32_t rows, const Matrix& W, View x) const;
  // Whether several prompts' last chunks may run as one burst (models/decode_batch.hpp).
  // Not on GPUs with exact rows: a GPU's prompt step takes other kernels than a burst's, so
  // a burst could not give each prompt's own step's results, bit for bit.
  bool bursts_prompts(bool exact_rows) const { return !exact_rows || cpu_kernels; }
};

ExecutionPlan make_plan(const vk::Context& ctx, const PlanModel& model);

// The plan for `model` and the kernels it leads to on this device, one line each for a
// model with f16 weights (`gpt-vk devices -v`).
std::string describe_plan(const vk::Context& ctx, const PlanModel& model);

}  // namespace gptvk
