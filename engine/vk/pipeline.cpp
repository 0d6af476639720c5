#include "engine/vk/pipeline.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "engine/vk/check.hpp"
#include "engine/vk/context.hpp"
#include "engine/vk/shader_registry.hpp"

namespace gptvk::vk {

namespace fs = std::filesystem;

namespace {

// Largest cache file read back (lavapipe's for every pipeline of GPT-2 XL is a few MB).
constexpr uint64_t kMaxCacheBytes = 256ull << 20;

// $GPTVK_CACHE_DIR (set but empty: no cache), else $XDG_CACHE_HOME/gpt-vk, else
// $HOME/.cache/gpt-vk. XDG_CACHE_HOME and HOME count only as absolute paths (the XDG rule):
// an empty HOME must not put the cache in ./.cache of whatever directory a run starts in.
// Without a usable one there is no persistent cache, said once on stderr.
fs::path cache_dir() {
  if (const char* d = std::getenv("GPTVK_CACHE_DIR")) return d;
  const char* x = std::getenv("XDG_CACHE_HOME");
  if (x && fs::path(x).is_absolute()) return fs::path(x) / "gpt-vk";
  const char* h = std::getenv("HOME");
  if (h && fs::path(h).is_absolute()) return fs::path(h) / ".cache" / "gpt-vk";
  std::fprintf(stderr,
               "gpt-vk: warning: no pipeline cache (HOME and XDG_CACHE_HOME are unset or not absolute paths; "
               "set GPTVK_CACHE_DIR to keep compiled pipelines between runs)\n");
  return {};
}

// The cache file's bytes; empty when there is none. Anything but a readable regular file
// (a directory, a FIFO, /dev/zero, a symlink loop) is skipped with one warning: the cache
// only saves start-up time, so it never stops or blocks a command.
std::string read_cache_file(const std::string& path, bool& broken) {
  broken = false;
  try {
    if (!files::exists(path, "")) return {};
    return files::read_regular(path, "", kMaxCacheBytes);
  } catch (const InputError& e) {
    std::fprintf(stderr, "gpt-vk: warning: ignoring the pipeline cache %s: %s\n", path.c_str(), e.what());
    broken = true;
    return {};
  }
}

// The file is keyed by device UUID and driver version, so a driver update starts a fresh cache.
std::string cache_file_name(VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(pd, &p);
  char name[128];
  std::string uuid;
  for (uint8_t b : p.pipelineCacheUUID) {
    std::snprintf(name, sizeof name, "%02x", b);
    uuid += name;
  }
  std::snprintf(name, sizeof name, "pipelines-%04x-%04x-%08x-", p.vendorID, p.deviceID, p.driverVersion);
  return std::string(name) + uuid + ".bin";
}

// Checks the header Vulkan defines for cache data, so a foreign or corrupt file is never
// handed to the driver.
bool header_matches(const std::string& data, VkPhysicalDevice pd) {
  if (data.size() < 32) return false;
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(pd, &p);
  uint32_t len, version, vendor, device;
  std::memcpy(&len, data.data(), 4);
  std::memcpy(&version, data.data() + 4, 4);
  std::memcpy(&vendor, data.data() + 8, 4);
  std::memcpy(&device, data.data() + 12, 4);
  return len >= 32 && version == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && vendor == p.vendorID &&
         device == p.deviceID && std::memcmp(data.data() + 16, p.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

}  // namespace

PipelineCache::PipelineCache(Context& ctx, bool persistent) : ctx_(ctx) {
  std::string initial;
  if (persistent) {
    fs::path dir = cache_dir();
    if (!dir.empty()) {
      path_ = (dir / cache_file_name(ctx.physical())).string();
      bool broken = false;
      initial = read_cache_file(path_, broken);
      if (broken) path_.clear();  // warned once; a save would only fail or replace what the user put there
      if (!header_matches(initial, ctx.physical())) initial.clear();
      saved_hash_ = std::hash<std::string>{}(initial);
    }
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  check(vkCreatePipelineCache(ctx.device(), &ci, nullptr, &cache_), "creating the pipeline cache");
}

PipelineCache::~PipelineCache() {
  try {
    save();
  } catch (...) {
    // A cache that cannot be saved only costs start-up time next run.
  }
  for (auto& [desc, p] : pipelines_) {
    vkDestroyPipeline(ctx_.device(), p->pipeline, nullptr);
    vkDestroyPipelineLayout(ctx_.device(), p->layout, nullptr);
    vkDestroyDescriptorSetLayout(ctx_.device(), p->set_layout, nullptr);
  }
  vkDestroyPipelineCache(ctx_.device(), cache_, nullptr);
}

void PipelineCache::save() const {
  if (path_.empty() || pipelines_.empty()) return;
  size_t n = 0;
  if (vkGetPipelineCacheData(ctx_.device(), cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::string data(n, '\0');
  if (vkGetPipelineCacheData(ctx_.device(), cache_, &n, data.data()) != VK_SUCCESS) return;
  data.resize(n);
  if (std::hash<std::string>{}(data) == saved_hash_) return;  // nothing new since it was read
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  // Atomic (engine/files.hpp): a concurrent reader never sees half a file, and a failed
  // write (full disk) leaves the previous cache as it was. A failure only costs start-up
  // time next run, so it is not reported.
  try {
    files::write_atomic(path_, {data}, "");
    saved_hash_ = std::hash<std::string>{}(data);
  } catch (const InputError&) {
  }
}

std::string interface_mismatch(const PipelineDesc& desc) {
  const ShaderInterface& shader = shader_interface(desc.shader);
  std::vector<uint32_t> bindings(desc.bindings);
  for (uint32_t i = 0; i < desc.bindings; ++i) bindings[i] = i;
  if (shader.bindings != bindings)
    return desc.shader + " declares " + std::to_string(shader.bindings.size()) + " bindings (numbered " +
           (shader.bindings.empty() ? "-" : std::to_string(shader.bindings.front()) + ".." +
                                                std::to_string(shader.bindings.back())) +
           "), the pipeline binds 0.." + std::to_string(int(desc.bindings) - 1);
  if (shader.push_bytes != desc.push_bytes)
    return desc.shader + " takes " + std::to_string(shader.push_bytes) + " push-constant bytes, the pipeline " +
           std::to_string(desc.push_bytes);
  // Constants the pipeline leaves out keep the shader's defaults (a variant may not read
  // them); one the shader lacks means the two disagree on the numbering.
  for (uint32_t id = 0; id < desc.spec.size(); ++id)
    if (!std::binary_search(shader.spec_ids.begin(), shader.spec_ids.end(), id))
      return desc.shader + " has no specialization constant " + std::to_string(id) + ", the pipeline sets 0.." +
             std::to_string(desc.spec.size() - 1);
  return "";
}

const Pipeline& PipelineCache::get(const PipelineDesc& desc) {
  auto it = pipelines_.find(desc);
  if (it != pipelines_.end()) return *it->second;
  // A pipeline whose layout disagrees with its shader is the caller's bug; caught here, once
  // per pipeline, instead of as undefined behaviour in the driver.
  if (std::string why = interface_mismatch(desc); !why.empty()) throw std::logic_error("pipeline: " + why);

  auto p = std::make_unique<Pipeline>();
  p->desc = desc;
  VkDevice dev = ctx_.device();

  std::vector<VkDescriptorSetLayoutBinding> bindings(desc.bindings);
  for (uint32_t i = 0; i < desc.bindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = desc.type(i);
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dci.bindingCount = desc.bindings;
  dci.pBindings = bindings.data();
  check(vkCreateDescriptorSetLayout(dev, &dci, nullptr, &p->set_layout), "creating a descriptor set layout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_bytes};
  VkPipelineLayoutCreateInfo lci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  lci.setLayoutCount = 1;
  lci.pSetLayouts = &p->set_layout;
  lci.pushConstantRangeCount = desc.push_bytes ? 1 : 0;
  lci.pPushConstantRanges = desc.push_bytes ? &range : nullptr;
  check(vkCreatePipelineLayout(dev, &lci, nullptr, &p->layout), "creating a pipeline layout");

  auto code = shader_spirv(desc.shader);
  VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mci.codeSize = code.size() * 4;
  mci.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(dev, &mci, nullptr, &module), ("creating shader module " + desc.shader).c_str());

  std::vector<VkSpecializationMapEntry> entries(desc.spec.size());
  for (uint32_t i = 0; i < desc.spec.size(); ++i) entries[i] = {i, i * 4, 4};
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = desc.spec.size() * 4;
  si.pData = desc.spec.data();

  VkComputePipelineCreateInfo pci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pci.stage.module = module;
  pci.stage.pName = "main";
  pci.stage.pSpecializationInfo = desc.spec.empty() ? nullptr : &si;
  pci.layout = p->layout;
  VkResult r = vkCreateComputePipelines(dev, cache_, 1, &pci, nullptr, &p->pipeline);
  vkDestroyShaderModule(dev, module, nullptr);
  check(r, ("creating pipeline " + desc.shader).c_str());
  return *pipelines_.emplace(desc, std::move(p)).first->second;
}

}  // namespace gptvk::vk
