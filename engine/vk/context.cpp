#include "engine/vk/context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "engine/env_switch.hpp"
#include "engine/error.hpp"
#include "engine/strict_number.hpp"
#include "engine/vk/check.hpp"
#include "engine/vk/pipeline.hpp"
#include "engine/vk/shader_registry.hpp"

namespace gptvk::vk {

namespace {

// Whether this process runs on an AMD Zen 5 CPU or later (CPUID vendor "AuthenticAMD",
// family 0x1A and up): on CPU Vulkan devices the host CPU is the device, and the decode
// mat-vec follows its memory system (Caps::column_split_matvec says which way it goes).
bool host_cpu_prefers_column_split() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xF, family = base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
  return family >= 0x1A;
#else
  return false;
#endif
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// Discrete GPUs first, CPU implementations (lavapipe) last: the order users expect.
int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::vector<VkPhysicalDevice> enumerate(VkInstance instance) {
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(n);
  check(vkEnumeratePhysicalDevices(instance, &n, devices.data()), "vkEnumeratePhysicalDevices");
  return devices;
}

DeviceInfo describe(VkPhysicalDevice pd, uint32_t index) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(pd, &props);
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  DeviceInfo info;
  info.index = index;
  info.name = props.deviceName;
  info.type = props.deviceType;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, mem.memoryHeaps[h].size);
  return info;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_device_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  for (auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// 16384 -> "16K", 1 << 30 -> "1G": the largest unit that divides exactly.
std::string size_str(uint64_t bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (u < 3 && bytes && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

// "64M" for GPTVK_FORCE's `key`: digits and an optional K/M/G, from `min` to `max` bytes
// (no sign, no wrap: "-1" or "1K" for a range counted in MiB are errors, not huge or 0).
uint64_t parse_size(const std::string& key, const std::string& s, uint64_t min, uint64_t max) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  std::string unit = s.substr(digits);
  int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" || unit == "m" ? 20
                                                    : unit == "G" || unit == "g" ? 30 : -1;
  uint64_t v = 0;
  if (shift < 0 || !parse_decimal_u64(s.substr(0, digits), v))
    throw UsageError("bad size '" + s + "' for " + key + " in GPTVK_FORCE (expected e.g. 64M or 16K)");
  if (v > (max >> shift) || (v << shift) < min)
    throw UsageError("GPTVK_FORCE: " + key + "=" + s + " is out of range (" + size_str(min) + " to " + size_str(max) + ")");
  return v << shift;
}

// GPTVK_VALIDATION turns the validation layer on; unset, it stays off.
bool validation_from_env() { return env_switch("GPTVK_VALIDATION", false); }
// GPTVK_VALIDATION_GPU turns it on with the layer's GPU-assisted validation too: every
// shader is instrumented to report a buffer access past its binding, which a device may
// otherwise drop or clamp in silence (lavapipe among them). Several times slower.
bool shader_checks_from_env() { return env_switch("GPTVK_VALIDATION_GPU", false); }

// GPTVK_DEVICE: a device index, as --device takes; -1 when unset.
int device_from_env() {
  const char* v = std::getenv("GPTVK_DEVICE");
  if (!v) return -1;
  uint64_t index = 0;
  if (!parse_decimal_u64(v, index) || index > 1u << 20)
    throw UsageError("GPTVK_DEVICE must be a device index (0, 1, ...; see `gpt-vk devices`), not '" + std::string(v) +
                     "'");
  return static_cast<int>(index);
}

VkInstance create_plain_instance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "gpt-vk";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  check(vkCreateInstance(&ci, nullptr, &instance), "creating the Vulkan instance");
  return instance;
}

}  // namespace

std::string DeviceInfo::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

uint64_t Caps::max_binding_bytes() const {
  return std::min({max_storage_buffer_range, max_allocation_bytes, max_buffer_bytes});
}

ForcedLimits ForcedLimits::parse(const std::string& spec) {
  ForcedLimits f;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const std::pair<const char*, bool*> switches[] = {
        {"no_fp16", &f.no_fp16}, {"no_subgroup", &f.no_subgroup},
        {"no_subgroup_arithmetic", &f.no_subgroup_arithmetic}, {"no_coopmat", &f.no_coopmat},
        {"coopmat_emu", &f.emulated_coopmat}, {"no_coopmat_attention", &f.no_coopmat_attention}, {"gpu", &f.gpu_kernels}};
    const auto on = std::find_if(std::begin(switches), std::end(switches), [&](const auto& s) { return key == s.first; });
    if (on != std::end(switches)) {
      // "no_fp16=0" would read as the switch turned off: it takes no value, and is off unless named.
      if (eq != std::string::npos)
        throw UsageError("GPTVK_FORCE: " + key + " takes no value ('" + item + "'); leave it out to keep it off");
      *on->second = true;
    }
    // `devices -v` prints ranges in MiB, so less than 1M would read "0 MiB"; shared memory is a uint32.
    else if (key == "max_range") f.max_storage_buffer_range = parse_size(key, value, 1ull << 20, 1ull << 40);
    else if (key == "shared") f.shared_memory_bytes = static_cast<uint32_t>(parse_size(key, value, 1ull << 10, 1ull << 31));
    else if (key == "matvec" && (value == "rows" || value == "cols")) f.column_split_matvec = value == "cols";
    else if (key == "matvec") throw UsageError("GPTVK_FORCE: matvec is 'rows' or 'cols', not '" + value + "'");
    else
      throw UsageError("unknown limit '" + key +
                       "' in GPTVK_FORCE (known: no_fp16, no_subgroup, no_subgroup_arithmetic, no_coopmat, "
                       "no_coopmat_attention, coopmat_emu, gpu, max_range=SIZE, shared=SIZE, matvec=rows|cols)");
  }
  return f;
}

ForcedLimits ForcedLimits::from_env() {
  const char* s = std::getenv("GPTVK_FORCE");
  return s ? parse(s) : ForcedLimits{};
}

ForcedLimits ForcedLimits::merged_with(const ForcedLimits& over) const {
  ForcedLimits m = *this;
  m.no_fp16 |= over.no_fp16;
  m.no_subgroup |= over.no_subgroup;
  m.no_subgroup_arithmetic |= over.no_subgroup_arithmetic;
  m.no_coopmat |= over.no_coopmat;
  m.emulated_coopmat |= over.emulated_coopmat;
  m.no_coopmat_attention |= over.no_coopmat_attention;
  m.gpu_kernels |= over.gpu_kernels;
  if (over.max_storage_buffer_range) m.max_storage_buffer_range = over.max_storage_buffer_range;
  if (over.shared_memory_bytes) m.shared_memory_bytes = over.shared_memory_bytes;
  if (over.column_split_matvec) m.column_split_matvec = over.column_split_matvec;
  return m;
}

VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data,
                                              void* user) {
  auto* ctx = static_cast<Context*>(user);
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    ctx->validation_messages_++;
    ctx->last_validation_message_ = data->pMessage ? data->pMessage : "";
    std::fprintf(stderr, "gpt-vk: validation: %s\n", ctx->last_validation_message_.c_str());
  }
  return VK_FALSE;
}

std::vector<DeviceInfo> Context::list_devices() {
  VkInstance instance = create_plain_instance();
  std::vector<DeviceInfo> out;
  try {
    auto devices = enumerate(instance);
    for (uint32_t i = 0; i < devices.size(); ++i) out.push_back(describe(devices[i], i));
  } catch (...) {
    vkDestroyInstance(instance, nullptr);
    throw;
  }
  vkDestroyInstance(instance, nullptr);
  return out;
}

Context::Context(const ContextOptions& options) {
  const bool shader_checks = shader_checks_from_env() || options.shader_checks;
  bool validation = validation_from_env() || options.validation || shader_checks;
  int index = options.device_index;
  const bool index_from_env = index < 0 && std::getenv("GPTVK_DEVICE");
  if (index < 0) index = device_from_env();
  try {
    const ForcedLimits forced = options.forced.merged_with(ForcedLimits::from_env());
    create_instance(validation, shader_checks);
    // pick_device words a missing index as --device's; one from the environment says so.
    if (index_from_env && static_cast<size_t>(index) >= enumerate(instance_).size())
      throw UsageError("GPTVK_DEVICE=" + std::to_string(index) + " names no device: there " +
                       (enumerate(instance_).size() == 1 ? "is 1" : "are " + std::to_string(enumerate(instance_).size())) +
                       " (see `gpt-vk devices`)");
    pick_device(index);
    read_caps(forced);
    create_device();
    pipelines_ = std::make_unique<PipelineCache>(*this, options.pipeline_cache);
  } catch (...) {
    release();
    throw;
  }
}

Context::~Context() { release(); }

void Context::release() {
  pipelines_.reset();
  if (device_) {
    vkDeviceWaitIdle(device_);
    if (fence_) vkDestroyFence(device_, fence_, nullptr);
    if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance_) {
    vkDestroyInstance(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
  }
}

void Context::create_instance(bool validation, bool shader_checks) {
  if (!validation) {
    instance_ = create_plain_instance();
    return;
  }
  if (!has_layer(kValidationLayer))
    throw DeviceError(std::string("validation was requested but ") + kValidationLayer +
                      " is not installed (Debian package vulkan-validationlayers)");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "gpt-vk";
  app.apiVersion = VK_API_VERSION_1_1;
  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  // Synchronization validation checks the graph's barriers, not only API usage; GPU-assisted
  // validation checks shaders' buffer accesses (through a descriptor set slot reserved for it).
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT,
                                            VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT,
                                            VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_RESERVE_BINDING_SLOT_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = shader_checks ? 3 : 1;
  features.pEnabledValidationFeatures = enables;
  VkDebugUtilsMessengerCreateInfoEXT dbg{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  dbg.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  dbg.pfnUserCallback = debug_callback;
  dbg.pUserData = this;
  features.pNext = &dbg;
  validation_mode_ = shader_checks ? "Khronos layer with shader checks" : "Khronos layer";
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pNext = &features;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = 1;
  ci.ppEnabledLayerNames = layers;
  ci.enabledExtensionCount = 1;
  ci.ppEnabledExtensionNames = extensions;
  check(vkCreateInstance(&ci, nullptr, &instance_), "creating the Vulkan instance with validation");
  auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  if (!create) throw DeviceError("validation layer has no VK_EXT_debug_utils");
  dbg.pNext = nullptr;
  check(create(instance_, &dbg, nullptr, &messenger_), "creating the validation messenger");
}

void Context::pick_device(int index) {
  auto devices = enumerate(instance_);
  if (devices.empty()) throw DeviceError("no Vulkan device found (install mesa-vulkan-drivers for lavapipe)");
  if (index >= 0) {
    if (index >= static_cast<int>(devices.size()))
      throw UsageError("--device " + std::to_string(index) + " does not exist: there " +
                       (devices.size() == 1 ? "is 1 device" : "are " + std::to_string(devices.size()) + " devices") +
                       " (see `gpt-vk devices`)");
    physical_ = devices[index];
    info_ = describe(physical_, index);
    return;
  }
  uint32_t best = 0;
  for (uint32_t i = 1; i < devices.size(); ++i)
    if (type_rank(describe(devices[i], i).type) < type_rank(describe(devices[best], best).type)) best = i;
  physical_ = devices[best];
  info_ = describe(physical_, best);
}

namespace {

// Whether a memory type is device-local, host-visible and coherent on the heap of
// `device_local_bytes` (the device's main heap): buffers there need no staging copies.
bool mappable_device_local(VkPhysicalDevice physical, uint64_t device_local_bytes) {
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  bool mappable = false;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    auto f = mem.memoryTypes[i].propertyFlags;
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((f & want) == want && mem.memoryHeaps[mem.memoryTypes[i].heapIndex].size == device_local_bytes)
      mappable = true;
  }
  return mappable;
}

// The queue family to run on, with its properties: a compute queue without graphics (async
// compute on discrete GPUs) first, else any compute queue; none if the device has none.
std::optional<std::pair<uint32_t, VkQueueFamilyProperties>> compute_queue_family(VkPhysicalDevice physical) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, families.data());
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t i = 0; i < n; ++i) {
      bool compute = families[i].queueFlags & VK_QUEUE_COMPUTE_BIT;
      bool graphics = families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
      if (compute && (pass == 1 || !graphics)) return std::pair{i, families[i]};
    }
  return std::nullopt;
}

}  // namespace

void Context::read_caps(const ForcedLimits& forced) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical_, &props);
  uint32_t api = props.apiVersion;

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  subgroup.pNext = &maint3;
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_, &props2);

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  bool f16_query = VK_API_VERSION_MINOR(api) >= 2 || has_device_extension(physical_, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  if (f16_query) storage16.pNext = &f16;
  VkPhysicalDeviceFeatures2 feats2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats2.pNext = &storage16;
  vkGetPhysicalDeviceFeatures2(physical_, &feats2);

  caps_.fp16_storage = storage16.storageBuffer16BitAccess;
  caps_.fp16_arithmetic = f16_query && f16.shaderFloat16;
  caps_.subgroup_size = subgroup.subgroupSize;
  caps_.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                              (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  caps_.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  caps_.shared_memory_bytes = props.limits.maxComputeSharedMemorySize;
  caps_.max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
  caps_.max_storage_buffer_range = props.limits.maxStorageBufferRange;
  caps_.max_allocation_bytes = maint3.maxMemoryAllocationSize;
  caps_.max_buffer_bytes = maint3.maxMemoryAllocationSize;  // maxBufferSize needs 1.3; allocation caps it anyway
  caps_.storage_offset_alignment = props.limits.minStorageBufferOffsetAlignment;
  // The widest shader binds 8 storage buffers (the decode mat-vec with the LayerNorm after
  // it: bias, residual, y, f16 row scales, gamma, beta, norm output, counter; x and W are
  // texel buffers); Vulkan only guarantees 4 per stage, real devices have 8 or (far) more.
  constexpr uint32_t kStorageBuffersNeeded = 8;
  if (props.limits.maxPerStageDescriptorStorageBuffers < kStorageBuffersNeeded)
    throw DeviceError("device '" + info_.name + "' allows " +
                      std::to_string(props.limits.maxPerStageDescriptorStorageBuffers) +
                      " storage buffers per shader; gpt-vk needs " + std::to_string(kStorageBuffersNeeded));
  VkFormatProperties fmt{};
  vkGetPhysicalDeviceFormatProperties(physical_, VK_FORMAT_R32G32B32A32_UINT, &fmt);
  caps_.texel_uvec4 = (fmt.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) != 0;
  caps_.max_texel_buffer_elements = props.limits.maxTexelBufferElements;
  caps_.device_local_bytes = info_.device_local_bytes;
  caps_.timestamp_period_ns = props.limits.timestampPeriod;

  caps_.unified_memory = mappable_device_local(physical_, info_.device_local_bytes) && (info_.is_cpu() ||
                                                   info_.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU);
  caps_.column_split_matvec = info_.is_cpu() && host_cpu_prefers_column_split();

  // What we enable is decided before forcing, so a forced fallback still runs on a fully enabled device.
  enable_16bit_storage_ = caps_.fp16_storage;
  enable_fp16_ = caps_.fp16_arithmetic;
  // The cooperative-matrix GEMM also needs f16 arithmetic and subgroups; what is enabled
  // for it follows the device, like the rest, and forcing only hides it from the ops.
  if (caps_.fp16_arithmetic && caps_.subgroup_arithmetic)
    caps_.coopmat = query_coopmat(instance_, physical_, shader_table().count("linear_coopmat.gemm_nv") > 0,
                                  shader_table().count("linear_coopmat.gemm_khr") > 0);
  enabled_coopmat_ = caps_.coopmat;

  apply_forced(forced);

  const auto queue = compute_queue_family(physical_);
  if (!queue) throw DeviceError("device '" + info_.name + "' has no compute queue");
  queue_family_ = queue->first;
  caps_.timestamps = queue->second.timestampValidBits > 0 && props.limits.timestampPeriod > 0;
}

// Hides what `forced` says the device lacks from the ops (Caps only: what the device was
// created with stays enabled), and picks the kernel family (cpu_kernels_).
void Context::apply_forced(const ForcedLimits& forced) {
  if (forced.no_fp16) caps_.fp16_storage = caps_.fp16_arithmetic = false;
  if (forced.no_subgroup) caps_.subgroup_arithmetic = caps_.subgroup_shuffle = false;
  if (forced.no_subgroup_arithmetic) caps_.subgroup_arithmetic = false;
  if (forced.emulated_coopmat && caps_.fp16_arithmetic && caps_.subgroup_arithmetic) caps_.coopmat = emulated_coopmat();
  if (forced.no_coopmat || forced.no_fp16 || forced.no_subgroup || forced.no_subgroup_arithmetic) caps_.coopmat = {};
  if (forced.no_coopmat_attention) caps_.coopmat_attention = false;
  // A GPU's kernels and staging uploads on any device, so that a machine without a GPU can
  // test them on whole models (tests/test_models.cpp); the device stays what it is.
  cpu_kernels_ = info_.is_cpu() && !forced.gpu_kernels;
  if (forced.gpu_kernels) caps_.unified_memory = false;
  if (forced.max_storage_buffer_range)
    caps_.max_storage_buffer_range = std::min(caps_.max_storage_buffer_range, *forced.max_storage_buffer_range);
  if (forced.shared_memory_bytes)
    caps_.shared_memory_bytes = std::min(caps_.shared_memory_bytes, *forced.shared_memory_bytes);
  if (forced.column_split_matvec) caps_.column_split_matvec = *forced.column_split_matvec;
}

void Context::create_device() {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = enable_16bit_storage_;
  VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f16.shaderFloat16 = enable_fp16_;
  std::vector<const char*> extensions;
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical_, &props);
  if (enable_fp16_) {
    storage16.pNext = &f16;
    if (VK_API_VERSION_MINOR(props.apiVersion) < 2) extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  CoopMatFeatures coopmat;
  if (enabled_coopmat_.api != CoopMatApi::None) {
    extensions.push_back(enabled_coopmat_.extension_name());
    extensions.push_back(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  }
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = coopmat.chain(enabled_coopmat_, &storage16);
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qci;
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  check(vkCreateDevice(physical_, &ci, nullptr, &device_), "creating the Vulkan device");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  check(vkCreateCommandPool(device_, &pci, nullptr, &pool_), "creating a command pool");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(device_, &fci, nullptr, &fence_), "creating a fence");
}

std::string Context::summary() const {
  std::ostringstream s;
  s << info_.name << " (" << info_.type_name() << ", " << (info_.device_local_bytes >> 20) << " MiB"
    << ", fp16 storage " << (caps_.fp16_storage ? "yes" : "no") << ", fp16 math " << (caps_.fp16_arithmetic ? "yes" : "no")
    << ", subgroup " << caps_.subgroup_size << (caps_.subgroup_arithmetic ? " arith" : " no-arith")
    << ", shared " << (caps_.shared_memory_bytes >> 10) << " KiB, max binding "
    << (caps_.max_binding_bytes() >> 20) << " MiB"
    << (caps_.coopmat.api != CoopMatApi::None ? ", " + caps_.coopmat.describe() : std::string())
    << (info_.is_cpu() && !cpu_kernels_ ? ", a GPU's kernels (GPTVK_FORCE=gpu)" : "") << ")";
  return s.str();
}

uint32_t Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                              VkMemoryPropertyFlags preferred) const {
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem);
  int fallback = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    auto f = mem.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  if (fallback < 0) throw DeviceError("device '" + info_.name + "' has no suitable memory type");
  return static_cast<uint32_t>(fallback);
}

VkCommandBuffer Context::begin_one_shot() {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(device_, &ai, &cb), "allocating a command buffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cb, &bi), "beginning a command buffer");
  return cb;
}

void Context::end_one_shot(VkCommandBuffer cb) {
  check(vkEndCommandBuffer(cb), "ending a command buffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VkResult r = vkQueueSubmit(queue_, 1, &si, fence_);
  if (r == VK_SUCCESS) r = vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  vkResetFences(device_, 1, &fence_);
  vkFreeCommandBuffers(device_, pool_, 1, &cb);
  check(r, "running a transfer on the device");
}

}  // namespace gptvk::vk
