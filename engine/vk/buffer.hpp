// A VkBuffer with its own memory, plus host upload/download (direct on unified memory,
// through a staging buffer otherwise).
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

namespace gptvk::vk {

class Context;

enum class Memory {
  Device,  // device-local; host-mapped too when the device has unified memory
  Host,    // host-visible and coherent: small per-step state and read-backs
};

class Buffer {
 public:
  Buffer() = default;
  // `what` names the buffer in error messages ("token embedding", "KV cache", ...).
  Buffer(Context& ctx, uint64_t bytes, Memory memory = Memory::Device, const std::string& what = "buffer");
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  bool empty() const { return buffer_ == VK_NULL_HANDLE; }
  // Host pointer when the memory is mapped (Memory::Host, or Device on unified memory), else null.
  void* mapped() const { return mapped_; }

  void upload(const void* src, uint64_t bytes, uint64_t offset = 0);
  void download(void* dst, uint64_t bytes, uint64_t offset = 0) const;
  void fill_zero();

  // A uniform-texel-buffer view of the whole buffer as uvec4 texels (R32G32B32A32_UINT),
  // owned by this buffer. The size must be a multiple of 16 bytes and the caller must have
  // checked caps.texel_uvec4 and caps.max_texel_buffer_elements.
  void create_texel_view();
  // The same where the device allows it (CPU kernels read activations this way when they
  // can); returns whether the buffer has a view.
  bool try_create_texel_view();
  bool can_have_texel_view() const;
  VkBufferView texel_view() const { return texel_view_; }

 private:
  void release();
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  uint64_t allocated_ = 0;  // the memory's size, which may exceed size_ (the device's alignment)
  void* mapped_ = nullptr;
  VkBufferView texel_view_ = VK_NULL_HANDLE;
};

}  // namespace gptvk::vk
