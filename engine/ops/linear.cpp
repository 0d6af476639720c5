#include "engine/ops/linear.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/ops/layernorm.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "engine/ops/linear_kernel.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

constexpr uint32_t kMaxGroups = 65535;  // per dimension: the smallest maxComputeWorkGroupCount allowed

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
// H100 has 132, and GPT-2 XL's 128-token prompt makes 50 tiles of its 1600-output products
// (bench/PERFORMANCE.md, "GPUs": 264 against 160 and no split).
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
  if (norm_before && !norm_before_fits(W))
    throw std::invalid_argument(name + ": a LayerNorm folded into the linear needs float weights in whole weight words");
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
  const uint64_t align = caps.storage_offset_alignment;
  const uint64_t step = std::lcm(align / std::gcd(align, l.x_row), align / std::gcd(align, l.y_row));
  const uint64_t row = std::max(l.x_row, l.y_row);
  uint64_t t_block = caps.max_storage_buffer_range / row;
  if (t_block == 0)
    throw DeviceError(name + ": one token row (" + std::to_string(row) +
                      " bytes) does not fit the device's storage buffer range");
  t_block = std::min<uint64_t>(t_block, uint64_t(kMaxGroups) * l.kernel.tokens_per_group);
  if (t_block < T) t_block = t_block / step * step;
  if (t_block == 0)
    throw DeviceError(name + ": " + std::to_string(T) + " tokens need blocks of " + std::to_string(step) +
                      " token rows of " + std::to_string(row) + " bytes (for the device's " + std::to_string(align) +
                      "-byte storage offset alignment), more than its storage buffer range of " +
                      std::to_string(caps.max_storage_buffer_range) + " bytes holds; at most " +
                      std::to_string(caps.max_storage_buffer_range / row) + " tokens run at once");
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
  const uint32_t token_groups = (tn + kernel.tokens_per_group - 1) / kernel.tokens_per_group;
  const std::array<uint32_t, 3> groups = kernel.outputs_in_x ? std::array<uint32_t, 3>{out_groups, token_groups, 1}
                                                      : std::array<uint32_t, 3>{token_groups, out_groups, 1};
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
  l.kernel = choose_kernel(ctx, args.kernel, T, W, x, args.norm_before != nullptr, args.coopmat_tiles);
  if (args.norm_before && !l.kernel.norm_before_variant)
    throw DeviceError(args.name + ": only the storage-buffer mat-vec folds a LayerNorm in");
  choose_blocks(ctx, l, T, N, args.name);
  choose_fusions(l, W, T, args);
  l.res_mode = !args.ep.residual ? 0 : l.in_place ? 2 : 1;

  // GPUs: a tiled GEMM of few tiles splits its inputs, where x, y, W and the partial sums
  // are each one binding.
  const uint32_t splits = l.kernel.splits_inputs && !ctx.cpu_kernels() && W.chunks.size() == 1 &&
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
