// Prompt attention on matrix units (shaders/attention_coopmat.comp): flash-attention style
// tiles of queries and keys through cooperative matrices, q, k, v and the softmax weights
// rounded to f16, f32 sums. For GPUs whose prompt products run on matrix units (any
// weights but f32, engine/plan.cpp); devices without them run it on emulated matrices in tests
// (GPTVK_FORCE=gpu,coopmat_emu).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/attention_shape.hpp"
#include "engine/vk/coopmat.hpp"

namespace gptvk {
namespace vk {
class Context;
}

namespace ops {

// A workgroup's tiles: `subgroups` x the matrix shape's m queries, `keys` keys a step.
struct CoopMatAttentionTiles {
  vk::CoopMatShape shape;
  uint32_t subgroups = 0, keys = 0;
  uint32_t subgroup = 0;  // invocations per subgroup
  std::string shader;     // "attention_coopmat.nv", "...khr" or "...emu", "_kvf16" for f16 caches
};

// The tiles for this head layout on this device; empty where the device has no
// cooperative matrices, the head dim is no multiple of the shape's sides, or the tiles do
// not fit its shared memory.
std::optional<CoopMatAttentionTiles> coopmat_attention_tiles(const vk::Context& ctx, AttentionShape s);

// Chunks this long or longer take it where the plan does (shorter ones make too few
// workgroups to fill a GPU, and their attention is cheap either way).
constexpr uint32_t kCoopMatAttentionMinTokens = 64;

// attention (engine/ops/attention.hpp) of T queries at positions pos0 .. pos0 + T - 1 (pos0
// from `step`) over the caches, which hold this step's keys and values already (kv_append
// first). Throws std::logic_error where coopmat_attention_tiles is empty.
void attention_coopmat(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T,
                       AttentionShape s, const std::string& name = "attention");

}  // namespace ops
}  // namespace gptvk
