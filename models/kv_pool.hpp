// The key and value caches of several sequences (a server's slots) in one buffer per layer
// and kind, slot s at s * slot_bytes, each slot laid out as one sequence's cache
// (ops::kv_cache_index). A model over a slot attends through views of its slot as if the
// cache were its own; a batched decode step over models of one pool reads every row's
// cache through one binding, so its attention is one dispatch a layer
// (ops::kv_append_attention_rows) and its graph does not depend on which slots it serves.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/graph.hpp"
#include "engine/ops/attention_shape.hpp"
#include "engine/vk/buffer.hpp"

namespace gptvk {

class KvPool {
 public:
  KvPool(vk::Context& ctx, uint32_t n_layers, ops::AttentionShape shape, uint32_t slots);

  uint32_t slots() const { return slots_; }
  // Slot s of layer l's key (value) cache.
  View keys(uint32_t l, uint32_t s) const { return slot_view(k_[l], s); }
  View values(uint32_t l, uint32_t s) const { return slot_view(v_[l], s); }
  // Every slot of layer l: what a batched step binds.
  View all_keys(uint32_t l) const { return whole(k_[l]); }
  View all_values(uint32_t l) const { return whole(v_[l]); }
  // Slot s's first element over 4 (its first vec4 unit of f32, or of four halves): the row
  // table's `slot` (ops::RowEntry).
  uint32_t slot_unit(uint32_t s) const;

 private:
  View slot_view(const vk::Buffer& b, uint32_t s) const { return View{&b, s * slot_bytes_, cache_bytes_}; }
  uint32_t slots_;
  uint64_t cache_bytes_, slot_bytes_, unit_bytes_;
  std::vector<vk::Buffer> k_, v_;
};

// Positions [begin, end) of every head of one sequence's key or value cache (a view laid
// out as ops::kv_cache_index says) copied to the same place in another's.
struct KvCopy {
  View from, to;
  uint32_t begin = 0, end = 0;
};
// One view copied whole to another of the same size (a kept row of logits).
struct ViewCopy {
  View from, to;
};
// Runs the copies (keys and values of positions, and whole views) in one submission,
// ordered after the work submitted before it and before the work after it, and waits for
// them.
void copy_on_device(vk::Context& ctx, std::span<const KvCopy> copies, ops::AttentionShape shape,
                       std::span<const ViewCopy> views = {});

}  // namespace gptvk
