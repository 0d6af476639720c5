#include "engine/vk/coopmat.hpp"

#include <cstring>
#include <sstream>

namespace gptvk::vk {

namespace {

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// The features both APIs' shaders need besides the matrices: the Vulkan memory model, at
// device scope too (once the model is enabled, every shader is held to it, and the other
// kernels' memoryBarrier() is a device-scope barrier).
bool memory_model_supported(VkPhysicalDevice pd) {
  VkPhysicalDeviceVulkanMemoryModelFeatures mm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &mm;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  return mm.vulkanMemoryModel && mm.vulkanMemoryModelDeviceScope;
}

std::vector<CoopMatShape> nv_shapes(VkInstance instance, VkPhysicalDevice pd) {
  VkPhysicalDeviceCooperativeMatrixFeaturesNV feat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &feat;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  auto list = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!feat.cooperativeMatrix || !list) return {};
  uint32_t n = 0;
  list(pd, &n, nullptr);
  std::vector<VkCooperativeMatrixPropertiesNV> props(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  list(pd, &n, props.data());
  std::vector<CoopMatShape> shapes;
  for (const auto& p : props)
    if (p.AType == VK_COMPONENT_TYPE_FLOAT16_NV && p.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_NV && p.DType == VK_COMPONENT_TYPE_FLOAT32_NV && p.scope == VK_SCOPE_SUBGROUP_NV)
      shapes.push_back({p.MSize, p.NSize, p.KSize});
  return shapes;
}

#ifdef VK_KHR_cooperative_matrix
std::vector<CoopMatShape> khr_shapes(VkInstance instance, VkPhysicalDevice pd) {
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR feat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &feat;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  auto list = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!feat.cooperativeMatrix || !list) return {};
  uint32_t n = 0;
  list(pd, &n, nullptr);
  std::vector<VkCooperativeMatrixPropertiesKHR> props(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
  list(pd, &n, props.data());
  std::vector<CoopMatShape> shapes;
  for (const auto& p : props)
    if (p.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && p.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && p.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
        p.scope == VK_SCOPE_SUBGROUP_KHR)
      shapes.push_back({p.MSize, p.NSize, p.KSize});
  return shapes;
}
#endif

}  // namespace

const char* CoopMatSupport::extension_name() const {
  return api == CoopMatApi::Nv         ? "VK_NV_cooperative_matrix"
         : api == CoopMatApi::Khr      ? "VK_KHR_cooperative_matrix"
         : api == CoopMatApi::Emulated ? "emulated cooperative matrices (GPTVK_FORCE=coopmat_emu)"
                                       : "";
}

std::string CoopMatSupport::describe() const {
  if (api == CoopMatApi::None) return "none";
  std::ostringstream s;
  s << extension_name() << ":";
  for (size_t i = 0; i < shapes.size(); ++i)
    s << (i ? ", " : " ") << shapes[i].m << "x" << shapes[i].n << "x" << shapes[i].k;
  return s.str();
}

CoopMatSupport emulated_coopmat() {
  CoopMatSupport s;
  s.api = CoopMatApi::Emulated;
  s.shapes = {{16, 16, 16}, {16, 8, 16}, {16, 8, 8}};
  return s;
}

CoopMatSupport query_coopmat(VkInstance instance, VkPhysicalDevice physical, bool built_nv, bool built_khr) {
  CoopMatSupport s;
  if (!memory_model_supported(physical)) return s;
  // The instance asks for Vulkan 1.1, so the memory model comes through its extension
  // (promoted to 1.2, and still listed by drivers of 1.2 and later).
  s.memory_model_extension = has_extension(physical, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  if (!s.memory_model_extension) return s;
#ifdef VK_KHR_cooperative_matrix
  if (built_khr && has_extension(physical, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    s.shapes = khr_shapes(instance, physical);
    if (!s.shapes.empty()) {
      s.api = CoopMatApi::Khr;
      return s;
    }
  }
#else
  (void)built_khr;
#endif
  if (built_nv && has_extension(physical, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    s.shapes = nv_shapes(instance, physical);
    if (!s.shapes.empty()) s.api = CoopMatApi::Nv;
  }
  return s;
}

void* CoopMatFeatures::chain(const CoopMatSupport& support, void* next) {
  if (support.api == CoopMatApi::None || support.api == CoopMatApi::Emulated) return next;
  memory_model.vulkanMemoryModel = VK_TRUE;
  memory_model.vulkanMemoryModelDeviceScope = VK_TRUE;
  memory_model.pNext = next;
  void* head = &memory_model;
  if (support.api == CoopMatApi::Nv) {
    nv.cooperativeMatrix = VK_TRUE;
    nv.pNext = head;
    head = &nv;
  }
#ifdef VK_KHR_cooperative_matrix
  if (support.api == CoopMatApi::Khr) {
    khr.cooperativeMatrix = VK_TRUE;
    khr.pNext = head;
    head = &khr;
  }
#endif
  return head;
}

}  // namespace gptvk::vk
