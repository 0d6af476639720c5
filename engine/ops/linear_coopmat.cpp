#include "engine/ops/linear_coopmat.hpp"

#include <algorithm>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

// The device's f16 shape the kernel uses: 16 x 16 x 16 where listed (NVIDIA's and AMD's
// common one), else the first whose sides are multiples of 8 (the staged rows are padded
// to 16 bytes, and BK below is a multiple of 8 and of the shape's K).
std::optional<vk::CoopMatShape> pick_shape(const vk::CoopMatSupport& s) {
  for (const auto& sh : s.shapes)
    if (sh.m == 16 && sh.n == 16 && sh.k == 16) return sh;
  for (const auto& sh : s.shapes)
    if (sh.m % 8 == 0 && sh.n % 8 == 0 && sh.k % 8 == 0 && sh.m <= 32 && sh.n <= 32 && sh.k <= 32) return sh;
  return std::nullopt;
}

}  // namespace

bool coopmat_available(const vk::Context& ctx, DType w_dtype) {
  const auto& s = ctx.caps().coopmat;
  return w_dtype == DType::F16 && s.api != vk::CoopMatApi::None && pick_shape(s).has_value();
}

std::optional<CoopMatTiles> coopmat_tiles(const vk::Context& ctx, uint32_t T, uint32_t N) {
  const auto& caps = ctx.caps();
  if (caps.coopmat.api == vk::CoopMatApi::None) return std::nullopt;
  const auto shape = pick_shape(caps.coopmat);
  if (!shape) return std::nullopt;
  struct Option {
    uint32_t wm, wn, tm, tn;  // subgroups along tokens and outputs, accumulators per subgroup
  };
  // With 256-token prompt chunks, GPT-2 XL's products make 100-400 square tiles, a few per
  // multiprocessor of an H100: each step's loads are issued before the previous step's
  // multiplies (common/linear_coopmat.glsl), which hides their latency without more tiles.
  // Thin: 4 subgroups side by side over 8 output matrices, for a batch of decode rows.
  // Square: 2 x 2 subgroups of 2 x 2 accumulators. Tall: 2 x 2 subgroups of 4 x 2, where the
  // product still makes two workgroups per multiprocessor of a large GPU (264 on an H100).
  const Option thin{1, 4, 1, 2}, square{2, 2, 2, 2}, tall{2, 2, 4, 2};
  auto tiles_of = [&](const Option& o) {
    const uint64_t bm = uint64_t(o.wm) * o.tm * shape->m, bn = uint64_t(o.wn) * o.tn * shape->n;
    return ((T + bm - 1) / bm) * ((N + bn - 1) / bn);
  };
  const Option pick = T <= shape->m ? thin : tiles_of(tall) >= 264 ? tall : square;
  CoopMatTiles t;
  t.cm = shape->m;
  t.cn = shape->n;
  t.ck = shape->k;
  t.tm = pick.tm;
  t.tn = pick.tn;
  t.bm = pick.wm * pick.tm * t.cm;
  t.bn = pick.wn * pick.tn * t.cn;
  t.bk = 64 % t.ck == 0 ? 64 : 2 * t.ck;  // whole W words and matrix steps
  t.subgroup = caps.subgroup_size;
  t.local = pick.wm * pick.wn * t.subgroup;
  // x and W staged as f16 in rows of bk halves and 8 of padding, and one accumulator per subgroup.
  const uint64_t shared = uint64_t(t.bm + t.bn) * (t.bk + 8) * 2 + uint64_t(pick.wm) * pick.wn * t.cm * t.cn * 4;
  if (shared > caps.shared_memory_bytes || t.local > caps.max_workgroup_invocations) return std::nullopt;
  t.shader = caps.coopmat.api == vk::CoopMatApi::Khr ? "linear_coopmat.gemm_khr" : "linear_coopmat.gemm_nv";
  return t;
}

}  // namespace gptvk::ops
