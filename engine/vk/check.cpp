#include "engine/vk/check.hpp"

#include "engine/error.hpp"

namespace gptvk::vk {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "success";
    case VK_NOT_READY: return "not ready";
    case VK_TIMEOUT: return "timeout";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case VK_ERROR_INITIALIZATION_FAILED: return "initialization failed";
    case VK_ERROR_DEVICE_LOST: return "device lost (the GPU driver reset or crashed)";
    case VK_ERROR_MEMORY_MAP_FAILED: return "memory map failed";
    case VK_ERROR_LAYER_NOT_PRESENT: return "layer not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "extension not present";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "feature not present";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "no compatible Vulkan driver";
    case VK_ERROR_TOO_MANY_OBJECTS: return "too many objects";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "format not supported";
    case VK_ERROR_FRAGMENTED_POOL: return "fragmented pool";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "out of descriptor pool memory";
    default: return "unknown Vulkan error";
  }
}

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS || r == VK_INCOMPLETE) return;
  throw DeviceError(std::string(what) + ": " + result_name(r) + " (VkResult " + std::to_string(r) + ")");
}

}  // namespace gptvk::vk
