#include "engine/ops/linear_coopmat.hpp"

#include <algorithm>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

// The device's f16 shape the kernel uses: 16 x 8 x 8 where listed, else 16 x 16 x 16, else
// the first whose sides are multiples of 8 (the staged rows are uvec4s of 8 halves). On an
// H100 (VK_NV_cooperative_matrix lists 16x16x16, 16x8x16 and 16x8x8), 16x8x8 with the tiles
// below was the fastest on every GPT-2 XL prompt product (bench/micro/coopmat_bench.cpp;
// bench/PERFORMANCE.md, "GPUs", matrix units).
std::optional<vk::CoopMatShape> pick_shape(const vk::CoopMatSupport& s) {
  for (const vk::CoopMatShape want : {vk::CoopMatShape{16, 8, 8}, vk::CoopMatShape{16, 16, 16}})
    for (const auto& sh : s.shapes)
      if (sh.m == want.m && sh.n == want.n && sh.k == want.k) return sh;
  for (const auto& sh : s.shapes)
    if (sh.m % 8 == 0 && sh.n % 8 == 0 && sh.k % 8 == 0 && sh.m <= 32 && sh.n <= 32 && sh.k <= 32) return sh;
  return std::nullopt;
}

}  // namespace

std::optional<vk::CoopMatShape> coopmat_shape(const vk::Context& ctx) {
  const auto& s = ctx.caps().coopmat;
  return s.api == vk::CoopMatApi::None ? std::nullopt : pick_shape(s);
}

bool coopmat_available(const vk::Context& ctx, DType w_dtype) {
  const auto& s = ctx.caps().coopmat;
  return w_dtype != DType::F32 && s.api != vk::CoopMatApi::None && pick_shape(s).has_value();
}

bool coopmat_available(const vk::Context& ctx, const Matrix& W) {
  return coopmat_available(ctx, W.dtype) && !W.outside_f16;
}

std::optional<CoopMatTiles> coopmat_tiles_of(const vk::Context& ctx, vk::CoopMatShape shape, uint32_t wm, uint32_t wn,
                                             uint32_t tm, uint32_t tn) {
  const auto& caps = ctx.caps();
  if (caps.coopmat.api == vk::CoopMatApi::None) return std::nullopt;
  CoopMatTiles t;
  t.cm = shape.m;
  t.cn = shape.n;
  t.ck = shape.k;
  t.tm = tm;
  t.tn = tn;
  t.bm = wm * tm * t.cm;
  t.bn = wn * tn * t.cn;
  t.bk = 64 % t.ck == 0 ? 64 : 2 * t.ck;  // whole W words and matrix steps
  t.subgroup = caps.subgroup_size;
  t.local = wm * wn * t.subgroup;
  // x and W staged as f16 in rows of bk halves and 8 of padding, and one accumulator per subgroup.
  const uint64_t shared = uint64_t(t.bm + t.bn) * (t.bk + 8) * 2 + uint64_t(wm) * wn * t.cm * t.cn * 4;
  if (shared > caps.shared_memory_bytes || t.local > caps.max_workgroup_invocations) return std::nullopt;
  const bool emulated = caps.coopmat.api == vk::CoopMatApi::Emulated;
  // The emulation spreads each accumulator evenly over the subgroup.
  if (emulated && (t.cm * t.cn) % t.subgroup != 0) return std::nullopt;
  t.shader = emulated                                   ? "linear_coopmat.gemm_emu"
             : caps.coopmat.api == vk::CoopMatApi::Khr ? "linear_coopmat.gemm_khr"
                                                       : "linear_coopmat.gemm_nv";
  return t;
}

std::optional<CoopMatTiles> coopmat_tiles(const vk::Context& ctx, uint32_t T) {
  const auto shape = coopmat_shape(ctx);
  if (!shape) return std::nullopt;
  // One matrix row of tokens per workgroup, 4 subgroups side by side, each with 4 (a batch
  // of up to one matrix row of tokens: 2) accumulators along the outputs: the fastest of
  // the shapes bench/PERFORMANCE.md ("GPUs", matrix units) compares on the H100.
  struct Option {
    uint32_t wm, wn, tm, tn;  // subgroups along tokens and outputs, accumulators per subgroup
  };
  const Option pick = T <= shape->m ? Option{1, 4, 1, 2} : Option{1, 4, 1, 4};
  return coopmat_tiles_of(ctx, *shape, pick.wm, pick.wn, pick.tm, pick.tn);
}

}  // namespace gptvk::ops
