// Turns a failed VkResult into a DeviceError whose message names the call and the cause.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

namespace gptvk::vk {

const char* result_name(VkResult r);

// Throws DeviceError("<what>: <cause>") unless r is VK_SUCCESS (or VK_INCOMPLETE).
void check(VkResult r, const char* what);

}  // namespace gptvk::vk
