#include "engine/vk/buffer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "engine/byte_size.hpp"
#include "engine/error.hpp"
#include "engine/vk/check.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::vk {

namespace {
constexpr uint64_t kStagingChunk = 32ull << 20;

// On a CPU device (lavapipe) device memory is plain process memory, and streaming weights
// through 4 KiB pages costs a TLB miss every 4 KiB: ask for transparent huge pages on the
// 2 MiB-aligned part of big buffers (before it is first touched). A hint only: where THP is
// off or unsupported nothing changes.
void advise_huge_pages(void* p, uint64_t bytes) {
#ifdef __linux__
  constexpr uintptr_t kHuge = 2u << 20;
  if (bytes < 4 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace

Buffer::Buffer(Context& ctx, uint64_t bytes, Memory memory, const std::string& what) : ctx_(&ctx) {
  bytes = std::max<uint64_t>((bytes + 3) & ~uint64_t(3), 4);
  const Caps& caps = ctx.caps();
  if (bytes > caps.max_allocation_bytes)
    throw DeviceError(what + " needs " + mib_ceil(bytes) + " in one allocation but the device allows at most " +
                      mib_ceil(caps.max_allocation_bytes));
  size_ = bytes;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(ctx.device(), &bci, nullptr, &buffer_), ("creating " + what).c_str());

  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(ctx.device(), buffer_, &req);
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = 0;
  bool map = false;
  if (memory == Memory::Host) {
    type = ctx.memory_type(req.memoryTypeBits, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    map = true;
  } else if (caps.unified_memory) {
    type = ctx.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host);
    map = true;
  } else {
    type = ctx.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(ctx.device(), &ai, nullptr, &memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    release();
    throw DeviceError("out of memory allocating " + what + " (" + mib_ceil(bytes) + "); the device has " +
                      mib_ceil(caps.device_local_bytes) + " of device-local memory");
  }
  check(r, ("allocating " + what).c_str());
  try {
    check(vkBindBufferMemory(ctx.device(), buffer_, memory_, 0), "binding buffer memory");
    if (map) check(vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "mapping buffer memory");
  } catch (...) {
    release();  // a constructor that throws gets no destructor
    throw;
  }
  allocated_ = req.size;
  ctx.count_allocation(static_cast<int64_t>(allocated_));
  if (mapped_ && caps.unified_memory) advise_huge_pages(mapped_, bytes);
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!ctx_) return;
  if (texel_view_) vkDestroyBufferView(ctx_->device(), texel_view_, nullptr);
  texel_view_ = VK_NULL_HANDLE;
  if (mapped_) vkUnmapMemory(ctx_->device(), memory_);
  if (buffer_) vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
  if (memory_) vkFreeMemory(ctx_->device(), memory_, nullptr);
  ctx_->count_allocation(-static_cast<int64_t>(allocated_));
  allocated_ = 0;
  mapped_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  size_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::exchange(o.ctx_, nullptr);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    allocated_ = std::exchange(o.allocated_, 0);
    mapped_ = std::exchange(o.mapped_, nullptr);
    texel_view_ = std::exchange(o.texel_view_, VK_NULL_HANDLE);
  }
  return *this;
}

bool Buffer::can_have_texel_view() const {
  const Caps& caps = ctx_->caps();
  return caps.texel_uvec4 && size_ % 16 == 0 && size_ / 16 <= caps.max_texel_buffer_elements;
}

bool Buffer::try_create_texel_view() {
  if (can_have_texel_view()) create_texel_view();
  return texel_view_ != VK_NULL_HANDLE;
}

void Buffer::create_texel_view() {
  if (texel_view_) return;
  if (!can_have_texel_view())
    throw std::logic_error("Buffer::create_texel_view: the device cannot view this buffer as uvec4 texels");
  VkBufferViewCreateInfo vci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  vci.buffer = buffer_;
  vci.format = VK_FORMAT_R32G32B32A32_UINT;
  vci.offset = 0;
  vci.range = VK_WHOLE_SIZE;
  check(vkCreateBufferView(ctx_->device(), &vci, nullptr, &texel_view_), "creating a texel buffer view");
}

void Buffer::upload(const void* src, uint64_t bytes, uint64_t offset) {
  if (offset + bytes > size_) throw std::logic_error("Buffer::upload past the end of the buffer");
  if (mapped_) {
    std::memcpy(static_cast<char*>(mapped_) + offset, src, bytes);
    return;
  }
  Buffer staging(*ctx_, std::min(bytes, kStagingChunk), Memory::Host, "staging buffer");
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min(bytes - done, staging.size());
    std::memcpy(staging.mapped(), static_cast<const char*>(src) + done, n);
    VkCommandBuffer cb = ctx_->begin_one_shot();
    VkBufferCopy region{0, offset + done, n};
    vkCmdCopyBuffer(cb, staging.handle(), buffer_, 1, &region);
    ctx_->end_one_shot(cb);
    done += n;
  }
}

void Buffer::download(void* dst, uint64_t bytes, uint64_t offset) const {
  if (offset + bytes > size_) throw std::logic_error("Buffer::download past the end of the buffer");
  if (mapped_) {
    std::memcpy(dst, static_cast<const char*>(mapped_) + offset, bytes);
    return;
  }
  Buffer staging(*ctx_, std::min(bytes, kStagingChunk), Memory::Host, "staging buffer");
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min(bytes - done, staging.size());
    VkCommandBuffer cb = ctx_->begin_one_shot();
    // Make earlier shader writes visible to the copy.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    VkBufferCopy region{offset + done, 0, n};
    vkCmdCopyBuffer(cb, buffer_, staging.handle(), 1, &region);
    VkMemoryBarrier hb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    hb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    hb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &hb, 0, nullptr, 0,
                         nullptr);
    ctx_->end_one_shot(cb);
    std::memcpy(static_cast<char*>(dst) + done, staging.mapped(), n);
    done += n;
  }
}

void Buffer::fill_zero() {
  if (mapped_) {
    std::memset(mapped_, 0, size_);
    return;
  }
  VkCommandBuffer cb = ctx_->begin_one_shot();
  vkCmdFillBuffer(cb, buffer_, 0, VK_WHOLE_SIZE, 0);
  ctx_->end_one_shot(cb);
}

}  // namespace gptvk::vk
