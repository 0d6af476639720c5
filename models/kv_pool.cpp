#include "models/kv_pool.hpp"

#include <stdexcept>

#include "engine/ops/attention.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

KvPool::KvPool(vk::Context& ctx, uint32_t n_layers, ops::AttentionShape shape, uint32_t slots)
    : slots_(slots), cache_bytes_(ops::kv_cache_bytes(shape)), unit_bytes_(shape.kv_f16 ? 8 : 16) {
  if (slots == 0) throw std::invalid_argument("KvPool: no slots");
  // Each slot starts where a buffer binding and a texel view may (a model binds its own).
  const uint64_t align = std::max<uint64_t>(ctx.caps().storage_offset_alignment, 16);
  slot_bytes_ = (cache_bytes_ + align - 1) / align * align;
  for (uint32_t l = 0; l < n_layers; ++l) {
    k_.emplace_back(ctx, slots * slot_bytes_, vk::Memory::Device, "key cache");
    v_.emplace_back(ctx, slots * slot_bytes_, vk::Memory::Device, "value cache");
    // Attention on CPU devices reads the caches through texel views (engine/ops/attention.hpp).
    k_.back().try_create_texel_view();
    v_.back().try_create_texel_view();
  }
}

uint32_t KvPool::slot_unit(uint32_t s) const { return static_cast<uint32_t>(s * slot_bytes_ / unit_bytes_); }

}  // namespace gptvk
