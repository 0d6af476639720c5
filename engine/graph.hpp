// A command-buffer graph: dispatches are nodes, buffer ranges are edges. Recording walks
// the nodes in order and inserts a barrier only where a node touches a range that an
// earlier node since the last barrier wrote (or writes a range one read). The command
// buffer is recorded once and can be replayed any number of times.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/vk/buffer.hpp"
#include "engine/vk/pipeline.hpp"

namespace gptvk {

namespace vk {
class Context;
}

// A byte range of a buffer that one binding sees. bytes == 0: up to the end of the buffer.
struct View {
  const vk::Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Set: bound as this uniform texel buffer view (of `buffer`) instead of a storage buffer;
  // offset/bytes still say which range the dispatch reads, for hazard tracking.
  VkBufferView texel = VK_NULL_HANDLE;
  uint64_t size() const { return bytes ? bytes : buffer->size() - offset; }
};
inline View whole(const vk::Buffer& b) { return View{&b, 0, 0}; }

enum class Access { Read, Write, ReadWrite };

struct Arg {
  View view;
  Access access = Access::Read;
};

struct Dispatch {
  std::string name;                      // what --profile calls it, e.g. "L3.attention"
  const vk::Pipeline* pipeline = nullptr;
  std::vector<Arg> args;                 // args[i] is binding i
  std::array<uint32_t, 3> groups{1, 1, 1};
  std::vector<uint32_t> push;            // push constants, one word each
  // For --profile's rates, a product's work: the bytes of weights it reads and its
  // multiply-adds times two (0: not a product).
  uint64_t weight_bytes = 0, flops = 0;
};

struct OpTime {
  std::string name;
  double ms = 0;
  uint32_t dispatches = 1;  // graph nodes whose times add up here
  uint64_t weight_bytes = 0, flops = 0;  // their Dispatch::weight_bytes and flops, summed
};

class Graph {
 public:
  explicit Graph(vk::Context& ctx);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Checks the dispatch against its pipeline and the device limits; throws on a mismatch.
  void add(Dispatch d);
  // Writes descriptor sets and records the command buffer; with `profile`, timestamps too.
  void record(bool profile = false);
  void run();     // submit and wait
  void submit();  // submit without waiting
  void wait();
  // Submits, without waiting, a command buffer that binds each of the graph's pipelines
  // with the same descriptor sets and dispatches no work: a driver that compiles a pipeline
  // at its first dispatch (lavapipe JIT-compiles on its queue thread) compiles them now,
  // while the host does other work (e.g. loads the weights this graph reads, which no
  // shader touches yet). The next submit() waits for it first. Nothing when in flight.
  void warm_up();

  vk::Context& context() const { return ctx_; }
  size_t size() const { return nodes_.size(); }
  size_t barrier_count() const { return barriers_; }
  bool recorded() const { return cb_ != VK_NULL_HANDLE; }
  // Per-dispatch GPU time of the last run (only when recorded with profile).
  std::vector<OpTime> timings() const;
  // Device memory of at least `bytes` for results that live only between two of this
  // graph's dispatches (split-K partial sums): the graph's own, shared by every op that
  // asks (the usual hazard tracking orders them), made on first use and kept with the graph.
  View scratch(uint64_t bytes);

 private:
  void submit_buffer(VkCommandBuffer cb);

  vk::Context& ctx_;
  std::vector<Dispatch> nodes_;
  std::deque<vk::Buffer> scratch_;  // scratch(): a larger one when a request outgrows the last
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkCommandBuffer warm_cb_ = VK_NULL_HANDLE;  // warm_up()'s empty dispatches
  std::vector<VkDescriptorSet> sets_;         // one per node
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  bool in_flight_ = false;
  size_t barriers_ = 0;
};

}  // namespace gptvk
