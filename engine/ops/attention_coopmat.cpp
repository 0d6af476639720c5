#include "engine/ops/attention_coopmat.hpp"

#include <cmath>
#include <stdexcept>

#include "engine/ops/linear_coopmat.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

// Shared memory of shaders/attention_coopmat.comp: the query, key and value tiles and P as
// halves in padded rows of uvec4s, the scores as floats, three floats of state per query.
uint64_t shared_bytes(const CoopMatAttentionTiles& t, uint32_t head_dim) {
  const uint64_t rows = uint64_t(t.subgroups) * t.shape.m, row = (head_dim / 8 + 1) * 16;
  return (rows + 2 * t.keys) * row + rows * (t.keys / 8 + 1) * 16 + rows * t.keys * 4 + rows * 3 * 4;
}

}  // namespace

std::optional<CoopMatAttentionTiles> coopmat_attention_tiles(const vk::Context& ctx, AttentionShape s) {
  const auto& caps = ctx.caps();
  const auto shape = coopmat_shape(ctx);
  if (!shape) return std::nullopt;
  if (s.head_dim % 8 || s.head_dim % shape->n || s.head_dim % shape->k) return std::nullopt;
  const bool emulated = caps.coopmat.api == vk::CoopMatApi::Emulated;
  if (emulated && (shape->m * shape->n) % caps.subgroup_size) return std::nullopt;
  // Two subgroups of queries share each key and value tile (a 256-token GPT-2 XL chunk
  // then makes 8 x 25 workgroups), 32 keys a step; fewer where shared memory is short.
  for (uint32_t subgroups : {2u, 1u})
    for (uint32_t keys : {32u, 16u}) {
      CoopMatAttentionTiles t{*shape, subgroups, keys, caps.subgroup_size, ""};
      if (keys % shape->n || keys % shape->k || shared_bytes(t, s.head_dim) > caps.shared_memory_bytes ||
          subgroups * t.subgroup > caps.max_workgroup_invocations)
        continue;
      t.shader = std::string("attention_coopmat.") +
                 (emulated ? "emu" : caps.coopmat.api == vk::CoopMatApi::Khr ? "khr" : "nv") + (s.kv_f16 ? "_kvf16" : "");
      return t;
    }
  return std::nullopt;
}

void attention_coopmat(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T,
                       AttentionShape s, const std::string& name) {
  const auto tiles = coopmat_attention_tiles(g.context(), s);
  if (!tiles) throw std::logic_error("attention_coopmat: the device has no cooperative matrices for this head layout");
  const uint64_t C = uint64_t(s.n_heads) * s.head_dim;
  if (T == 0 || qkv.size() < T * 3 * C * 4 || out.size() < T * C * 4 || k_cache.size() < kv_cache_bytes(s) ||
      v_cache.size() < kv_cache_bytes(s))
    throw std::logic_error("attention_coopmat: a view is smaller than its T x C, T x 3C or cache contents");
  const uint32_t local = tiles->subgroups * tiles->subgroup, queries = tiles->subgroups * tiles->shape.m;
  const std::vector<uint32_t> spec = {local, s.head_dim, uint32_t(C), s.context,
                                      vk::spec_f32(1.0f / std::sqrt(float(s.head_dim))), tiles->subgroups, tiles->keys,
                                      tiles->shape.m, tiles->shape.n, tiles->shape.k, tiles->subgroup};
  const auto& p = g.context().pipelines().get({tiles->shader, spec, 5, 4});
  g.add({name, &p,
         {{qkv, Access::Read}, {step, Access::Read}, {k_cache, Access::Read}, {v_cache, Access::Read}, {out, Access::Write}},
         {(T + queries - 1) / queries, s.n_heads, 1},
         {T}});
}

}  // namespace gptvk::ops
