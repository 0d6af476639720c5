#include "engine/vk/pipeline.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "engine/vk/check.hpp"
#include "engine/vk/context.hpp"
#include "engine/vk/shader_registry.hpp"

namespace gptvk::vk {

namespace fs = std::filesystem;

namespace {

// $GPTVK_CACHE_DIR, else $XDG_CACHE_HOME/gpt-vk, else ~/.cache/gpt-vk; empty if none is usable.
fs::path cache_dir() {
  if (const char* d = std::getenv("GPTVK_CACHE_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return fs::path(x) / "gpt-vk";
  if (const char* h = std::getenv("HOME")) return fs::path(h) / ".cache" / "gpt-vk";
  return {};
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
bool header_matches(const std::vector<char>& data, VkPhysicalDevice pd) {
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
  std::vector<char> initial;
  if (persistent) {
    fs::path dir = cache_dir();
    if (!dir.empty()) {
      path_ = (dir / cache_file_name(ctx.physical())).string();
      std::ifstream in(path_, std::ios::binary);
      if (in) initial.assign(std::istreambuf_iterator<char>(in), {});
      if (!header_matches(initial, ctx.physical())) initial.clear();
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
  std::vector<char> data(n);
  if (vkGetPipelineCacheData(ctx_.device(), cache_, &n, data.data()) != VK_SUCCESS) return;
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  // Write then rename, so a concurrent reader never sees half a file.
  std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(n));
    if (!out) return;
  }
  fs::rename(tmp, path_, ec);
  if (ec) fs::remove(tmp, ec);
}

const Pipeline& PipelineCache::get(const PipelineDesc& desc) {
  auto it = pipelines_.find(desc);
  if (it != pipelines_.end()) return *it->second;

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
