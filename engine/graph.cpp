#include "engine/graph.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/vk/check.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

namespace {

struct Range {
  VkBuffer buffer;
  uint64_t begin, end;
  bool write;
};

bool conflicts(const Range& a, const Range& b) {
  return a.buffer == b.buffer && (a.write || b.write) && a.begin < b.end && b.begin < a.end;
}

void global_barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src;
  mb.dstAccessMask = dst;
  vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

VkCommandBuffer allocate_command_buffer(vk::Context& ctx) {
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = ctx.command_pool();
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  vk::check(vkAllocateCommandBuffers(ctx.device(), &cai, &cb), "allocating a command buffer");
  return cb;
}

// Orders every compute access before it ahead of everything after it (the next dispatch,
// host reads, copies and fills, the next submission).
void final_barrier(VkCommandBuffer cb) {
  global_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

// A byte count in whole MiB when it is one, else in KiB, rounded `up` or down: a binding up
// and a limit down, so that one over the other never reads as the same size ("1 MiB, more
// than 1 MiB"; drivers report limits such as 2^32 - 1).
std::string size_text(uint64_t bytes, bool up) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string((bytes + (up ? 1023 : 0)) >> 10) + " KiB";
}

}  // namespace

Graph::Graph(vk::Context& ctx) : ctx_(ctx) {}

Graph::~Graph() {
  VkDevice dev = ctx_.device();
  if (in_flight_) vkWaitForFences(dev, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (queries_) vkDestroyQueryPool(dev, queries_, nullptr);
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (cb_) vkFreeCommandBuffers(dev, ctx_.command_pool(), 1, &cb_);
  if (warm_cb_) vkFreeCommandBuffers(dev, ctx_.command_pool(), 1, &warm_cb_);
  if (pool_) vkDestroyDescriptorPool(dev, pool_, nullptr);
}

void Graph::add(Dispatch d) {
  if (recorded()) throw std::logic_error("Graph::add after record");
  if (!d.pipeline) throw std::logic_error("dispatch '" + d.name + "' has no pipeline");
  const auto& desc = d.pipeline->desc;
  if (d.args.size() != desc.bindings)
    throw std::logic_error("dispatch '" + d.name + "' binds " + std::to_string(d.args.size()) + " buffers, " +
                           desc.shader + " takes " + std::to_string(desc.bindings));
  if (d.push.size() * 4 != desc.push_bytes)
    throw std::logic_error("dispatch '" + d.name + "' pushes " + std::to_string(d.push.size() * 4) +
                           " bytes, " + desc.shader + " takes " + std::to_string(desc.push_bytes));
  const auto& caps = ctx_.caps();
  for (uint32_t i = 0; i < d.args.size(); ++i) {
    const auto& a = d.args[i];
    if (!a.view.buffer || a.view.buffer->empty())
      throw std::logic_error("dispatch '" + d.name + "' binds an empty buffer");
    if (a.view.offset + a.view.size() > a.view.buffer->size())
      throw std::logic_error("dispatch '" + d.name + "' binds past the end of a buffer");
    const bool texel = desc.type(i) == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    if (texel != (a.view.texel != VK_NULL_HANDLE))
      throw std::logic_error("dispatch '" + d.name + "' binding " + std::to_string(i) +
                             (texel ? " needs a texel buffer view" : " is a storage buffer but has a texel view"));
    if (texel) {
      if (a.access != Access::Read) throw std::logic_error("dispatch '" + d.name + "' writes a uniform texel buffer");
      continue;  // the view's own range is what the shader sees; the storage limits do not apply
    }
    if (a.view.offset % caps.storage_offset_alignment)
      throw std::logic_error("dispatch '" + d.name + "' binds at an unaligned offset");
    if (a.view.size() > caps.max_storage_buffer_range)
      throw DeviceError("dispatch '" + d.name + "' binds " + size_text(a.view.size(), true) +
                        ", more than the device's storage buffer range of " + size_text(caps.max_storage_buffer_range, false));
  }
  for (uint32_t g : d.groups)
    if (g == 0 || g > 65535) throw std::logic_error("dispatch '" + d.name + "' has a bad group count");
  nodes_.push_back(std::move(d));
}

namespace {

// Writes one descriptor set per dispatch of `nodes` into `sets`, from `pool`, created here
// sized for exactly these bindings (and the graph's to destroy, even if this throws).
void write_descriptor_sets(VkDevice dev, const std::vector<Dispatch>& nodes, VkDescriptorPool& pool,
                           std::vector<VkDescriptorSet>& sets) {
  uint32_t storage = 0, texel = 0;
  for (const auto& n : nodes)
    for (const auto& a : n.args) (a.view.texel ? texel : storage) += 1;
  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(storage, 1u)},
                                   {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, texel}};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = std::max<uint32_t>(static_cast<uint32_t>(nodes.size()), 1);
  pci.poolSizeCount = texel ? 2 : 1;
  pci.pPoolSizes = sizes;
  vk::check(vkCreateDescriptorPool(dev, &pci, nullptr, &pool), "creating a descriptor pool");

  // Descriptor sets are written once here; replaying the graph touches none of them.
  sets.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &n.pipeline->set_layout;
    vk::check(vkAllocateDescriptorSets(dev, &ai, &sets[i]), "allocating a descriptor set");
    std::vector<VkDescriptorBufferInfo> infos(n.args.size());
    std::vector<VkWriteDescriptorSet> writes(n.args.size());
    for (size_t b = 0; b < n.args.size(); ++b) {
      infos[b] = {n.args[b].view.buffer->handle(), n.args[b].view.offset, n.args[b].view.size()};
      writes[b] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[b].dstSet = sets[i];
      writes[b].dstBinding = static_cast<uint32_t>(b);
      writes[b].descriptorCount = 1;
      if (n.args[b].view.texel) {
        writes[b].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
        writes[b].pTexelBufferView = &n.args[b].view.texel;
      } else {
        writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[b].pBufferInfo = &infos[b];
      }
    }
    vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
}

// The dispatches in order, with a global barrier wherever one touches what an earlier one
// since the last barrier wrote (or writes what it read); a timestamp after each when profiling.
// Returns the number of barriers it recorded.
size_t record_dispatches(VkCommandBuffer cb, const std::vector<Dispatch>& nodes,
                         const std::vector<VkDescriptorSet>& sets, VkQueryPool queries, bool timestamps) {
  std::vector<Range> pending;  // ranges touched since the last barrier
  size_t barriers = 0;
  const vk::Pipeline* bound = nullptr;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    std::vector<Range> mine;
    for (const auto& a : n.args) {
      // A texel view covers its whole buffer, and so, for the synchronization validation
      // layer, does every read through it, whatever range the shader fetches.
      const uint64_t begin = a.view.texel ? 0 : a.view.offset;
      const uint64_t end = a.view.texel ? a.view.buffer->size() : a.view.offset + a.view.size();
      mine.push_back({a.view.buffer->handle(), begin, end, a.access != Access::Read});
    }
    bool hazard = false;
    for (const auto& m : mine)
      for (const auto& p : pending) hazard |= conflicts(m, p);
    if (hazard) {
      global_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      ++barriers;
      pending.clear();
    }
    pending.insert(pending.end(), mine.begin(), mine.end());

    if (bound != n.pipeline) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, n.pipeline->pipeline);
      bound = n.pipeline;
    }
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, n.pipeline->layout, 0, 1, &sets[i], 0, nullptr);
    if (!n.push.empty())
      vkCmdPushConstants(cb, n.pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<uint32_t>(n.push.size() * 4), n.push.data());
    vkCmdDispatch(cb, n.groups[0], n.groups[1], n.groups[2]);
    if (timestamps)
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries, static_cast<uint32_t>(i + 1));
  }
  return barriers;
}

}  // namespace

void Graph::record(bool profile) {
  if (recorded()) throw std::logic_error("Graph::record called twice");
  VkDevice dev = ctx_.device();

  write_descriptor_sets(dev, nodes_, pool_, sets_);

  cb_ = allocate_command_buffer(ctx_);
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk::check(vkCreateFence(dev, &fci, nullptr, &fence_), "creating a fence");

  bool timestamps = profile && ctx_.caps().timestamps;
  uint32_t query_count = static_cast<uint32_t>(nodes_.size()) + 1;
  if (timestamps) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = query_count;
    vk::check(vkCreateQueryPool(dev, &qci, nullptr, &queries_), "creating a timestamp query pool");
  }

  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vk::check(vkBeginCommandBuffer(cb_, &bi), "beginning the graph's command buffer");
  if (timestamps) {
    vkCmdResetQueryPool(cb_, queries_, 0, query_count);
    vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
  }
  // Host writes and uploads made before this submission become visible to the shaders.
  global_barrier(cb_, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);

  barriers_ = record_dispatches(cb_, nodes_, sets_, queries_, timestamps);
  // Results become visible to the host, to read-back copies and to the next replay.
  final_barrier(cb_);
  vk::check(vkEndCommandBuffer(cb_), "ending the graph's command buffer");
}

void Graph::warm_up() {
  if (!recorded()) throw std::logic_error("Graph::warm_up before record");
  if (in_flight_) return;  // already submitted: its pipelines are compiled by the time it ends
  if (!warm_cb_) {
    warm_cb_ = allocate_command_buffer(ctx_);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk::check(vkBeginCommandBuffer(warm_cb_, &bi), "beginning a warm-up command buffer");
    std::vector<const vk::Pipeline*> seen;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const auto& n = nodes_[i];
      if (std::find(seen.begin(), seen.end(), n.pipeline) != seen.end()) continue;
      seen.push_back(n.pipeline);
      vkCmdBindPipeline(warm_cb_, VK_PIPELINE_BIND_POINT_COMPUTE, n.pipeline->pipeline);
      vkCmdBindDescriptorSets(warm_cb_, VK_PIPELINE_BIND_POINT_COMPUTE, n.pipeline->layout, 0, 1, &sets_[i], 0,
                              nullptr);
      if (!n.push.empty())
        vkCmdPushConstants(warm_cb_, n.pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(n.push.size() * 4), n.push.data());
      vkCmdDispatch(warm_cb_, 0, 0, 0);
      // An empty dispatch still counts, for synchronization validation, as touching what
      // it binds: keep them ordered.
      final_barrier(warm_cb_);
    }
    vk::check(vkEndCommandBuffer(warm_cb_), "ending a warm-up command buffer");
  }
  submit_buffer(warm_cb_);
}

void Graph::submit() {
  if (!recorded()) throw std::logic_error("Graph::submit before record");
  submit_buffer(cb_);
}

void Graph::submit_buffer(VkCommandBuffer cb) {
  if (in_flight_) wait();
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  vk::check(vkQueueSubmit(ctx_.queue(), 1, &si, fence_), "submitting work to the device");
  in_flight_ = true;
}

void Graph::wait() {
  if (!in_flight_) return;
  VkResult r = vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  in_flight_ = false;
  vkResetFences(ctx_.device(), 1, &fence_);
  vk::check(r, "waiting for the device");
}

void Graph::run() {
  submit();
  wait();
}

View Graph::scratch(uint64_t bytes) {
  if (recorded()) throw std::logic_error("Graph::scratch after record");
  if (scratch_.empty() || scratch_.back().size() < bytes)
    scratch_.emplace_back(ctx_, std::max<uint64_t>(bytes, 16), vk::Memory::Device, "graph scratch");
  return View{&scratch_.back(), 0, bytes};
}

std::vector<OpTime> Graph::timings() const {
  std::vector<OpTime> out;
  if (!queries_) return out;
  std::vector<uint64_t> ts(nodes_.size() + 1);
  VkResult r = vkGetQueryPoolResults(ctx_.device(), queries_, 0, static_cast<uint32_t>(ts.size()),
                                     ts.size() * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                                     VK_QUERY_RESULT_64_BIT);
  if (r != VK_SUCCESS) return out;
  double period_ms = ctx_.caps().timestamp_period_ns * 1e-6;
  for (size_t i = 0; i < nodes_.size(); ++i)
    out.push_back({nodes_[i].name, static_cast<double>(ts[i + 1] - ts[i]) * period_ms, 1, nodes_[i].weight_bytes,
                   nodes_[i].flops});
  return out;
}

}  // namespace gptvk
