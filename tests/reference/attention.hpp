// Plain CPU reference for the KV-cache attention ops (engine/ops/attention.hpp), computed in
// double: the yardstick the GPU kernels are tested against.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/ops/attention_shape.hpp"

namespace gptvk::cpu {

// Key and value pos0 + t of every head from qkv[t][C:2C] and qkv[t][2C:3C], for t < T.
// Caches are laid out by ops::kv_cache_index, as floats; with s.kv_f16 each element is
// what an f16 cache holds (rounded to nearest even). Requires pos0 + T <= context.
void kv_append(const std::vector<float>& qkv, std::vector<float>& k_cache, std::vector<float>& v_cache,
               uint32_t pos0, uint32_t T, ops::AttentionShape s);

// Returns out [T][C]: out[t][h*hd + d] = sum_{j <= pos0+t} softmax_j(q_t,h . k_j,h / sqrt(hd)) v_j,h[d],
// with q from qkv[t][0:C] and keys/values from the caches (already holding this step's rows).
std::vector<float> attention(const std::vector<float>& qkv, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, uint32_t pos0, uint32_t T, ops::AttentionShape s);

}  // namespace gptvk::cpu
