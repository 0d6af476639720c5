#include "engine/plan.hpp"

#include <sstream>

#include "engine/ops/attention.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

ExecutionPlan make_plan(const vk::Context& ctx, const PlanModel& model) {
  ExecutionPlan p;
  p.cpu_kernels = ctx.cpu_kernels();
  p.fold_norms = !p.cpu_kernels && model.pre_norm && model.n_layers > 0 && model.norms_foldable;
  p.tiled_prompt_attention = p.cpu_kernels && model.max_chunk >= ops::kTiledMinTokens;
  p.last_row_on_chunk_pipelines = p.cpu_kernels;
  p.coopmat_prompt_attention = !p.cpu_kernels && model.f16_products && ctx.caps().coopmat_attention &&
                               ops::coopmat_attention_tiles(ctx, model.attention).has_value();
  return p;
}

ops::LinearKernel ExecutionPlan::linear_kernel(const vk::Context& ctx, uint32_t T, uint32_t rows, const Matrix& W,
                                               View x) const {
  return last_row_on_chunk_pipelines && rows < T ? ops::auto_kernel(ctx, T, W, x) : ops::LinearKernel::Auto;
}

ops::LinearKernel ExecutionPlan::batch_linear_kernel(const vk::Context& ctx, uint32_t rows, bool exact_rows,
                                                     const Matrix& W, View x) const {
  const ops::LinearKernel one = ops::auto_kernel(ctx, 1, W, x);
  const bool row_kernel = one == ops::LinearKernel::MatVecRows || one == ops::LinearKernel::MatVecRowsHeld;
  if (!exact_rows) return ops::LinearKernel::Auto;
  if (rows == 1) return one;
  // CPU devices whose lanes split each row's columns: the same kernel over several rows,
  // each weight decoded once for them (the GEMMs sum in the row kernels' order, not this).
  if (one == ops::LinearKernel::MatVecCols) return ops::LinearKernel::MatVecColsBatch;
  // GPUs: the one-token mat-vec over every row (with its LayerNorm folded in where the
  // one-token step folds it), each row's sums as that step's.
  if (!row_kernel) return one;
  // A few rows leave most lanes of the CPU GEMM's narrowest token tile (a subgroup of
  // tokens) on padding: the batched row mat-vec, which keeps the same order, reads each
  // weight once for them instead. The GEMM wins from 5-7 rows on, depending on the model
  // (bench/PERFORMANCE.md, "Batched decode").
  if (rows <= 4 && !is_quantized(W.dtype)) return ops::LinearKernel::MatVecRowsBatch;
  // The CPU GEMM that broadcasts weights over the lanes (gemm_bcast, which Auto picks where
  // the row kernels run and the device has subgroup arithmetic) sums each output in the row
  // kernels' order too, and took less CPU time than the batched row kernel on lavapipe
  // (bench/PERFORMANCE.md, "Batched decode"). Without it, quantized weights, which have no
  // batched row kernel, take the one-token row kernel over every row.
  if (ctx.caps().subgroup_arithmetic) return ops::LinearKernel::Auto;
  return is_quantized(W.dtype) ? one : ops::LinearKernel::MatVecRowsBatch;
}

bool ExecutionPlan::batch_norm_in_lanes(const vk::Context& ctx, const Matrix& W, View x) const {
  const ops::LinearKernel k = ops::auto_kernel(ctx, 1, W, x);
  const bool row_kernel = k == ops::LinearKernel::MatVecRows || k == ops::LinearKernel::MatVecRowsHeld ||
                          k == ops::LinearKernel::MatVecCols;
  return row_kernel && ctx.caps().subgroup_arithmetic && W.chunks.size() == 1;
}

namespace {

// The decode mat-vec ops::auto_kernel picks for K inputs in f16, where the weights and x
// have texel views when the device can make them.
std::string decode_matvec(const vk::Context& ctx, uint32_t K) {
  const bool texel = ctx.caps().texel_uvec4;
  switch (ops::decode_kernel(ctx, K, DType::F16, texel, texel)) {
    case ops::LinearKernel::MatVecTexel: return "matvec_texel (split-K over texel fetches)";
    case ops::LinearKernel::MatVecCols: return "matvec_cols (lanes split each row's columns)";
    case ops::LinearKernel::MatVecRowsHeld: return "matvec_rows_held (rows per invocation, x held)";
    case ops::LinearKernel::MatVecRows: return "matvec_rows (rows per invocation)";
    default:
      return ctx.cpu_kernels() ? "matvec (storage loads)" : "matvec (256 invocations, subgroup or shared-memory sums)";
  }
}

std::string attention_kernel_name(const ops::AttentionKernel& k) {
  if (k.texel)
    return "texel (a key per lane, " + (k.queries == 1 ? std::string("one query") : std::to_string(k.queries) + " queries") +
           " per workgroup)";
  std::string name = k.wide ? "wide" : k.subgroup ? "subgroup" : "shared";
  return name + (k.vec4 ? "_vec4" : "") + " (" + std::to_string(k.local) + " invocations)";
}

}  // namespace

std::string describe_plan(const vk::Context& ctx, const PlanModel& model) {
  const ExecutionPlan plan = make_plan(ctx, model);
  const ops::AttentionShape& shape = model.attention;
  const bool texel_views = ctx.caps().texel_uvec4;  // the model's buffers have them where the device can
  std::ostringstream s;
  s << "plan: " << (plan.cpu_kernels ? "a CPU device's kernels" : "a GPU's kernels") << "\n";
  s << "  decode products: " << decode_matvec(ctx, shape.n_heads * shape.head_dim) << "\n";
  s << "  prompt products: "
    << (plan.cpu_kernels ? "gemm register tiles (the wide tile from " + std::to_string(ops::kWideTileMinTokens) +
                               " tokens, and for 16-bit weights in chunks of whole " +
                               std::to_string(2 * std::max(ctx.caps().subgroup_size, 1u)) + "-token workgroups)"
        : ops::coopmat_available(ctx, DType::F16)
            ? "gemm_coopmat on matrix units, " + ctx.caps().coopmat.describe() +
                  " (f16, bf16, q8_0 and q4_0 weights, as f16; split over the inputs when tiles are few)"
            : std::string("gemm_tiled (split over the inputs when tiles are few)"))
    << "\n";
  s << "  decode attention: " << attention_kernel_name(ops::attention_kernel(ctx, shape, texel_views, 1)) << "\n";
  s << "  prompt attention: "
    << (plan.coopmat_prompt_attention
            ? "flash-attention tiles on matrix units from " + std::to_string(ops::kCoopMatAttentionMinTokens) +
                  " tokens (weights of any dtype but f32)"
        : plan.tiled_prompt_attention
            ? "tiled scores and values passes from " + std::to_string(ops::kTiledMinTokens) + " tokens"
            : attention_kernel_name(ops::attention_kernel(ctx, shape, texel_views, 128)))
    << "\n";
  const bool fused = ops::last_workgroup_fusions(ctx, ops::decode_kernel(ctx, shape.n_heads * shape.head_dim,
                                                                         DType::F16, texel_views, texel_views));
  s << "  LayerNorms: "
    << (fused             ? "after each residual add, in the mat-vec's last workgroup (one token)"
        : plan.fold_norms ? "folded into the next mat-vec (pre-LN, one token)"
                          : "a dispatch of their own")
    << "\n";
  s << "  greedy pick: " << (fused ? "in the LM head's last workgroup" : "a sampler dispatch") << "\n";
  s << "  last prompt row: "
    << (plan.last_row_on_chunk_pipelines ? "alone in the last layer, through the chunk's pipelines (tiled chunks)"
                                         : "alone in the last layer, through the one-token kernels")
    << "\n";
  return s.str();
}

}  // namespace gptvk
