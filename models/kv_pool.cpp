#include "models/kv_pool.hpp"

#include <stdexcept>
#include <vector>

#include "engine/ops/attention_shape.hpp"
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

void copy_on_device(vk::Context& ctx, std::span<const KvCopy> copies, ops::AttentionShape shape,
                       std::span<const ViewCopy> views) {
  if (copies.empty() && views.empty()) return;
  const uint64_t elem = shape.kv_f16 ? 2 : 4;
  VkCommandBuffer cb = ctx.begin_one_shot();
  // The shaders and copies that wrote the sources, before these copies read them; these
  // copies before any later shader, copy or host read of what they wrote. (Each submission
  // here waits on its fence today; the barriers do not rely on it.)
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr,
                         VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  std::vector<VkBufferCopy> regions;
  for (const KvCopy& c : copies) {
    if (c.begin >= c.end || c.end > shape.context) throw std::invalid_argument("copy_on_device: bad positions");
    regions.clear();
    for (uint32_t h = 0; h < shape.n_heads; ++h)
      regions.push_back({c.from.offset + ops::kv_cache_index(shape, h, c.begin, 0) * elem,
                         c.to.offset + ops::kv_cache_index(shape, h, c.begin, 0) * elem,
                         uint64_t(c.end - c.begin) * shape.head_dim * elem});
    vkCmdCopyBuffer(cb, c.from.buffer->handle(), c.to.buffer->handle(), static_cast<uint32_t>(regions.size()),
                    regions.data());
  }
  for (const ViewCopy& c : views) {
    if (c.from.size() != c.to.size()) throw std::invalid_argument("copy_on_device: views of different sizes");
    const VkBufferCopy region{c.from.offset, c.to.offset, c.from.size()};
    vkCmdCopyBuffer(cb, c.from.buffer->handle(), c.to.buffer->handle(), 1, &region);
  }
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &after, 0, nullptr, 0, nullptr);
  ctx.end_one_shot(cb);
}

uint32_t KvPool::slot_unit(uint32_t s) const { return static_cast<uint32_t>(s * slot_bytes_ / unit_bytes_); }

}  // namespace gptvk
