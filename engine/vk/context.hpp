// The Vulkan instance, the chosen physical device, one compute queue and what the device can do.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/vk/coopmat.hpp"

namespace gptvk::vk {

class PipelineCache;
class Buffer;

struct DeviceInfo {
  uint32_t index = 0;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint64_t device_local_bytes = 0;  // size of the largest device-local heap
  std::string type_name() const;
  // A CPU implementation (lavapipe). A fact of the device, true whatever kernels run on it:
  // which kernel family the ops pick is Context::cpu_kernels().
  bool is_cpu() const { return type == VK_PHYSICAL_DEVICE_TYPE_CPU; }
};

// What the chosen device offers, after any forced limits are applied. Ops pick shader
// variants from this, never from the raw Vulkan structs, so forcing a limit here
// exercises the fallback paths on any device.
struct Caps {
  bool fp16_storage = false;     // storageBuffer16BitAccess
  bool fp16_arithmetic = false;  // shaderFloat16
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders
  bool subgroup_shuffle = false;     // subgroupShuffle in compute shaders
  uint32_t subgroup_size = 1;
  uint32_t shared_memory_bytes = 16384;
  uint32_t max_workgroup_invocations = 128;
  uint64_t max_storage_buffer_range = 128ull << 20;
  uint64_t max_allocation_bytes = 1ull << 30;
  uint64_t max_buffer_bytes = 1ull << 30;
  uint64_t storage_offset_alignment = 256;
  // Uniform texel buffers of R32G32B32A32_UINT (uvec4 texels): on lavapipe their fetches are
  // vectorised while every storage-buffer load is a per-lane loop, so weight streaming uses them.
  bool texel_uvec4 = false;
  uint64_t max_texel_buffer_elements = 0;  // texels per buffer view
  uint64_t device_local_bytes = 0;
  bool unified_memory = false;  // device-local memory is host-visible (CPU devices, most iGPUs)
  bool timestamps = false;
  float timestamp_period_ns = 1.0f;
  // CPU devices: the decode mat-vec's lanes split each row's columns (one stream of weights
  // per workgroup) rather than take a row each (engine/ops/linear_kernels.cpp). Set where
  // the host CPU is an AMD Zen 5 or later, the only hosts where it decoded faster; elsewhere
  // the row kernel's batched steps also run faster (bench/PERFORMANCE.md, "Decode: the
  // mat-vecs").
  bool column_split_matvec = false;
  // Matrix units through cooperative matrices (engine/vk/coopmat.hpp); api None: none, or
  // GPTVK_FORCE=no_coopmat.
  CoopMatSupport coopmat;
  // Prompt attention may run on the matrix units too (ops::attention_coopmat); false with
  // GPTVK_FORCE=no_coopmat_attention.
  bool coopmat_attention = true;
  // The largest single binding any op may use: min of the storage range, allocation and buffer caps.
  uint64_t max_binding_bytes() const;
};

// Limits pretended lower than the device's, to test small-device paths on any device.
// From the environment: GPTVK_FORCE="no_fp16,no_subgroup,max_range=64M,shared=16K"; also
// "matvec=rows" or "matvec=cols" picks the CPU decode mat-vec (Caps::column_split_matvec).
struct ForcedLimits {
  bool no_fp16 = false;
  bool no_subgroup = false;
  // "no_subgroup_arithmetic": subgroup shuffles without subgroupAdd and the like, as some
  // devices offer them, for the kernels that choose by each.
  bool no_subgroup_arithmetic = false;
  bool no_coopmat = false;  // "no_coopmat": the GEMMs of the FP32 units, not the matrix units
  // "coopmat_emu": the matrix-unit kernels on emulated cooperative matrices (engine/vk/coopmat.hpp),
  // on devices with f16 arithmetic and subgroups; taken with "gpu" on CPU devices, whose own
  // kernels never use matrix units. For tests.
  bool emulated_coopmat = false;
  // "no_coopmat_attention": prompt attention off the matrix units, the GEMMs still on them (A/B runs).
  bool no_coopmat_attention = false;
  // "gpu": a CPU device runs a GPU's kernels and staging uploads (Context::cpu_kernels() false,
  // Caps::unified_memory off); the device type stays what it is.
  bool gpu_kernels = false;
  std::optional<uint64_t> max_storage_buffer_range;
  std::optional<uint32_t> shared_memory_bytes;
  std::optional<bool> column_split_matvec;
  static ForcedLimits parse(const std::string& spec);  // throws UsageError on a bad spec
  static ForcedLimits from_env();
  // These with `over`'s switches added and its values in place of these (the environment's
  // over a caller's).
  ForcedLimits merged_with(const ForcedLimits& over) const;
};

struct ContextOptions {
  int device_index = -1;        // -1: best device (discrete > integrated > virtual > CPU)
  bool validation = false;      // enable VK_LAYER_KHRONOS_validation and count its messages
  bool shader_checks = false;   // validation, with shaders' buffer accesses checked (GPTVK_VALIDATION_GPU)
  ForcedLimits forced;
  bool pipeline_cache = true;   // load/save the on-disk pipeline cache
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Every Vulkan device on this machine in enumeration order (what `gpt-vk devices` prints).
  static std::vector<DeviceInfo> list_devices();

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  VkCommandPool command_pool() const { return pool_; }
  const Caps& caps() const { return caps_; }
  const DeviceInfo& info() const { return info_; }
  // Which kernel family the ops pick: a CPU device's (texel-view mat-vecs, register-blocked
  // GEMMs, SIMD-wide workgroups) or a GPU's. A policy, not a device fact: it follows
  // info().is_cpu() unless GPTVK_FORCE=gpu runs a GPU's kernels on a CPU device, so that a
  // machine without a GPU tests them. Limits of the device itself (lavapipe's loop-iteration
  // cap, its host-backed heap) follow info().is_cpu().
  bool cpu_kernels() const { return cpu_kernels_; }
  std::string summary() const;  // one line: device, type, memory, capabilities

  // What checks this context runs: "off", "Khronos layer" or "Khronos layer with shader
  // checks" (GPTVK_VALIDATION, --validation, GPTVK_VALIDATION_GPU); `devices -v` says it.
  const char* validation_mode() const { return validation_mode_; }
  // Validation messages (warnings and errors) seen so far; tests require zero.
  uint64_t validation_messages() const { return validation_messages_.load(); }
  const std::string& last_validation_message() const { return last_validation_message_; }

  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred = 0) const;
  // Bytes of device memory the context's buffers hold now (vk::Buffer keeps it), so that a
  // test can hold an estimate of what a model allocates to the truth.
  uint64_t allocated_bytes() const { return allocated_bytes_.load(); }
  void count_allocation(int64_t bytes) { allocated_bytes_ += static_cast<uint64_t>(bytes); }

  // One-shot command buffers for uploads and downloads.
  VkCommandBuffer begin_one_shot();
  void end_one_shot(VkCommandBuffer cb);  // submits, waits, frees

  PipelineCache& pipelines() { return *pipelines_; }

 private:
  friend VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                       VkDebugUtilsMessageTypeFlagsEXT,
                                                       const VkDebugUtilsMessengerCallbackDataEXT*,
                                                       void*);
  void release();  // destroys every Vulkan object; safe on a half-built context
  void create_instance(bool validation, bool shader_checks);
  void pick_device(int index);
  void read_caps(const ForcedLimits& forced);
  void apply_forced(const ForcedLimits& forced);
  void create_device();

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  Caps caps_;
  DeviceInfo info_;
  bool cpu_kernels_ = false;
  bool enable_fp16_ = false, enable_16bit_storage_ = false;
  CoopMatSupport enabled_coopmat_;
  const char* validation_mode_ = "off";
  std::atomic<uint64_t> validation_messages_{0};
  std::atomic<uint64_t> allocated_bytes_{0};
  std::string last_validation_message_;
  std::unique_ptr<PipelineCache> pipelines_;
};

}  // namespace gptvk::vk
