// Cooperative matrices (matrix units, e.g. NVIDIA's tensor cores) as the linear layer's
// GEMM uses them: f16 A and B, f32 accumulator, subgroup scope. Two Vulkan extensions
// offer them, VK_KHR_cooperative_matrix and the older VK_NV_cooperative_matrix; each is
// used only where both the device has it and this build compiled its shader variant
// (cmake/Shaders.cmake probes the build's glslang for each GLSL extension).
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gptvk::vk {

// Emulated: the kernels' matrix operations done by plain subgroup code
// (shaders/common/coopmat_emu.glsl), only where GPTVK_FORCE=coopmat_emu asks for it, so that
// devices without matrix units (lavapipe) test the kernels written for them.
enum class CoopMatApi { None, Nv, Khr, Emulated };

struct CoopMatShape {
  uint32_t m = 0, n = 0, k = 0;  // A: m x k, B: k x n, C: m x n
};

struct CoopMatSupport {
  CoopMatApi api = CoopMatApi::None;
  std::vector<CoopMatShape> shapes;  // f16 x f16 + f32 -> f32, subgroup scope, as the device lists them
  // Device creation also enables VK_KHR_vulkan_memory_model: the GLSL extensions' scope
  // qualifiers make the shaders use the Vulkan memory model.
  bool memory_model_extension = false;
  const char* extension_name() const;
  std::string describe() const;  // "VK_NV_cooperative_matrix: 16x16x16, 16x8x16" or "none"
};

// The emulated API with the shapes the H100 lists (16x16x16, 16x8x16, 16x8x8).
CoopMatSupport emulated_coopmat();

// What the physical device offers (f16 arithmetic, which the shaders need, checked by the
// caller). `built_nv` / `built_khr`: whether this build embedded that API's shader variant.
CoopMatSupport query_coopmat(VkInstance instance, VkPhysicalDevice physical, bool built_nv, bool built_khr);

// The feature structs device creation chains in when `support.api` is not None.
struct CoopMatFeatures {
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
#ifdef VK_KHR_cooperative_matrix
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR khr{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
#endif
  // Links the structs for `support` in front of `next`; returns the head of the chain.
  void* chain(const CoopMatSupport& support, void* next);
};

}  // namespace gptvk::vk
