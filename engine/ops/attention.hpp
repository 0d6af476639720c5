// Causal multi-head self-attention over a per-layer KV cache, for prefill (T tokens) and
// decode (T = 1, replayed at advancing positions). The position of the step's first token
// is read by the shaders from the step buffer (engine/ops/step.hpp), so a recorded graph
// replays unchanged while the position advances.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/ops/attention_shape.hpp"

namespace gptvk {
namespace vk {
class Context;
}

namespace ops {

// Appends this step's keys and values to the caches: for t < T, key pos0 + t of head h is
// qkv[t][C + h*hd : C + (h+1)*hd] and its value qkv[t][2C + h*hd : ...]; pos0 = step_pos
// (shaders/common/step.glsl). qkv is f32 [T][3C] (GPT-2's c_attn output: q, k, v thirds);
// caches as kv_cache_index lays them out. Positions past the end of the cache are dropped
// (the caller must keep pos0 + T <= context).
void kv_append(Graph& g, View qkv, View step, View k_cache, View v_cache, uint32_t T, AttentionShape s,
               const std::string& name = "kv_append");

// out[t][h*hd + d] = sum_{j <= pos0 + t} softmax_j(q_t,h . k_j,h / sqrt(hd)) v_j,h[d]
// q from qkv[t][0:C] (qkv row stride 3C); keys/values from the caches (positions 0..pos0+T-1,
// so kv_append for this step comes first). out is f32 [T][C]. One dispatch, sized by T and
// the shape only: the key count is read at run time.
void attention(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T, AttentionShape s,
               const std::string& name = "attention");

// kv_append followed by attention, in a single dispatch: the step's own keys and values are
// read straight from qkv while the same workgroups write them to the caches. Same results.
// With a `scores` scratch (attention_tiled_scratch_bytes, with a texel view) on a device
// where attention_tiled_ok, steps of kTiledMinTokens or more run kv_append_attention_tiled.
void kv_append_attention(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T,
                         AttentionShape s, const std::string& name = "attention", View scores = {});

// Prefill attention for CPU devices: kv_append, then the scores of every query and key into
// `scores` and a softmax-weighted sum of values from them, both register-blocked GEMM-like
// passes (shaders/common/attention_tiled.glsl). Same results as attention within f32 rounding.
// `scores` holds n_heads * T rows of the context rounded up to 4 floats, 16-byte aligned,
// in a buffer with a texel view.
void kv_append_attention_tiled(Graph& g, View qkv, View step, View k_cache, View v_cache, View scores, View out,
                               uint32_t T, AttentionShape s, const std::string& name = "attention");
// Its two passes alone (the keys and values already appended): for a step's last query
// after a chunk's kv_append, on the chunk's own pipelines (GptModel::build_graph).
void attention_tiled(Graph& g, View qkv, View step, View k_cache, View v_cache, View scores, View out, uint32_t T,
                     AttentionShape s, const std::string& name = "attention");
// The attention of several sequences' steps in one dispatch: a batched decode step (row b
// of qkv the next token of sequence b) or a burst of prompts (a run of rows per sequence).
// Each sequence's caches are a slot of the pools k_pool / v_pool (each slot
// kv_cache_bytes(s), laid out as one sequence's cache). rows[b] is a RowEntry: row b is query
// `in_step` of a step of its sequence starting at position `pos0` (qkv rows
// b - in_step .. b are that step's first rows), and gets what kv_append_attention of that
// step alone on the slot's views gives it (same arithmetic) where the step takes the texel
// kernel with one query a workgroup (steps_match_rows); rows marked `skip` are left to other
// dispatches. The table is read at run time, so one recorded dispatch serves any set of
// sequences. CPU devices with the texel kernel only (attention_rows_ok); others run the
// steps one by one.
struct RowEntry {
  uint32_t pos0;      // the step's first position
  uint32_t slot;      // the slot's first element / 4 (KvPool::slot_unit)
  uint32_t in_step;   // the row's index in its step
  uint32_t skip = 0;  // nonzero: not this dispatch's row
};
static_assert(sizeof(RowEntry) == 16, "the shader reads a uvec4 per row");
void kv_append_attention_rows(Graph& g, View qkv, View rows, View k_pool, View v_pool, View out, uint32_t B,
                              AttentionShape s, const std::string& name = "attention");
bool attention_rows_ok(const vk::Context& ctx, View qkv, View k_pool, View v_pool, AttentionShape s);
// Whether kv_append_attention of a T-token step on these views computes each query as
// kv_append_attention_rows does (the texel kernel, one query a workgroup, not the tiled passes).
bool steps_match_rows(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, uint32_t T,
                      AttentionShape s);
// Whether kv_append_attention of T tokens takes the tiled path with these views.
bool takes_tiled_path(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, uint32_t T,
                      AttentionShape s);
uint64_t attention_tiled_scratch_bytes(AttentionShape s, uint32_t max_tokens);
// The device runs it (subgroup shuffles in workgroups of one subgroup of 4-16 lanes, texel
// views of the buffers at 16-byte aligned offsets, head_dim % 4 == 0).
bool attention_tiled_ok(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, AttentionShape s);
// Steps this long or longer take the tiled path where kv_append_attention may (it gains
// from 16 tokens on; bench/PERFORMANCE.md, "Prefill: attention"). Shorter prompts keep the
// decode step's kernel, compiled once for both: the tiled passes would add their JIT to the
// first decode step of a short prompt.
constexpr uint32_t kTiledMinTokens = 16;

// How the attention shader runs (shaders/attention.comp). attention_kernel picks it from
// the device's caps; tests force the other paths to check them on one device.
struct AttentionKernel {
  bool subgroup = false;  // lanes split the head dims, one subgroupAdd per key; else one key per invocation
  bool vec4 = false;      // 16-byte cache loads (head_dim % 4 == 0)
  uint32_t local = 8;     // workgroup size; with subgroup a multiple of the subgroup size
  bool texel = false;     // one key per invocation with vec4 texel fetches of qkv and the caches,
                          // whose buffers then need texel views and 16-byte aligned views
  uint32_t queries = 1;   // texel: queries per workgroup when T > 1 (1-4), each key fetched once for all
  bool wide = false;      // with subgroup: all keys' scores at once into shared memory, then all values
                          // (GPUs; needs local >= head_dim / (vec4 ? 4 : 1) and CONTEXT scores of shared memory)
  bool rows = false;      // texel, appending: each query a different sequence's one-token step
                          // (kv_append_attention_rows)
};
// `texel_views`: the caller's qkv and cache views can be read through texel views
// (texel_views_ok), which CPU devices then use; T: tokens per step, which sets how many
// queries the texel kernel serves per workgroup.
AttentionKernel attention_kernel(const vk::Context& ctx, AttentionShape s, bool texel_views = false, uint32_t T = 1);
bool texel_views_ok(View qkv, View k_cache, View v_cache);

// attention (append = false) or kv_append_attention (append = true) with a given kernel;
// throws std::logic_error when the kernel does not fit the device or the shape.
void attention_with(Graph& g, const AttentionKernel& kernel, bool append, View qkv, View step, View k_cache,
                    View v_cache, View out, uint32_t T, AttentionShape s, const std::string& name);

}  // namespace ops
}  // namespace gptvk
