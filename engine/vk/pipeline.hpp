// Compute pipelines built from embedded SPIR-V, keyed by shader and specialization
// constants, and a VkPipelineCache kept on disk so the second start compiles nothing.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace gptvk::vk {

class Context;

// Everything that identifies one pipeline. Specialization constant i is constant_id i.
struct PipelineDesc {
  std::string shader;                       // embedded module name, e.g. "linear.f16"
  std::vector<uint32_t> spec;               // model dimensions, tile sizes, flags
  uint32_t bindings = 0;                    // buffers at set 0, bindings 0..n-1
  uint32_t push_bytes = 0;                  // push-constant block size (multiple of 4)
  uint32_t texel_bindings = 0;              // bit i: binding i is a uniform texel buffer instead
  bool operator<(const PipelineDesc& o) const {
    return std::tie(shader, spec, bindings, push_bytes, texel_bindings) <
           std::tie(o.shader, o.spec, o.bindings, o.push_bytes, o.texel_bindings);
  }
  VkDescriptorType type(uint32_t binding) const {
    return (texel_bindings >> binding) & 1u ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                            : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  }
};

// Bit pattern of a float for a float specialization constant.
inline uint32_t spec_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Pipeline {
  PipelineDesc desc;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

// Why `desc` does not fit its shader's interface (shader_registry.hpp: set 0 bindings
// 0..bindings-1, the push-constant block's size, a constant_id for each of spec), or
// "" when it does. PipelineCache::get throws std::logic_error with it.
std::string interface_mismatch(const PipelineDesc& desc);

class PipelineCache {
 public:
  PipelineCache(Context& ctx, bool persistent);
  ~PipelineCache();  // saves the cache to disk when persistent
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // The pipeline for `desc`, created on first request and shared afterwards.
  const Pipeline& get(const PipelineDesc& desc);
  size_t size() const { return pipelines_.size(); }
  void save() const;
  const std::string& path() const { return path_; }

 private:
  Context& ctx_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string path_;  // empty: not persistent
  mutable size_t saved_hash_ = 0;  // of the file's contents as last read or written
  std::map<PipelineDesc, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace gptvk::vk
