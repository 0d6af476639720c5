// The head layout of attention and of its KV cache: plain data, no Vulkan (the CPU
// references in tests/reference/ use it too).
#pragma once
#include <cstdint>

namespace gptvk::ops {

// Head layout: embedding width C = n_heads * head_dim; context = positions each cache holds;
// kv_f16: the caches hold f16 (head_dim % 8 == 0), else f32.
struct AttentionShape {
  uint32_t n_heads, head_dim, context;
  bool kv_f16 = false;
};

// Bytes of one cache (keys or values) of one layer.
inline uint64_t kv_cache_bytes(AttentionShape s) {
  return uint64_t(s.n_heads) * s.head_dim * s.context * (s.kv_f16 ? 2 : 4);
}

// The caches are [n_heads][context][head_dim] (f32, or f16), head-major: element d of head h's key
// (or value) at position j is at this index. A head's keys are then one contiguous run that
// its attention workgroup streams through in order; position-major rows ([context][C])
// scattered each head's slices (256 bytes for GPT-2) a whole row apart, which CPU caches
// prefetch badly (bench/PERFORMANCE.md, "What limits it").
inline uint64_t kv_cache_index(AttentionShape s, uint64_t h, uint64_t j, uint64_t d) {
  return (h * s.context + j) * s.head_dim + d;
}

}  // namespace gptvk::ops
