#include "engine/ops/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

void check_shape(const char* op, View qkv, View k_cache, View v_cache, uint32_t T, AttentionShape s) {
  auto fail = [&](const std::string& why) { throw std::logic_error(std::string(op) + ": " + why); };
  if (s.n_heads == 0 || s.head_dim == 0 || s.context == 0 || T == 0) fail("empty shape");
  if (T > 65535 || s.n_heads > 65535) fail("more tokens or heads than one grid dimension holds");
  uint64_t C = uint64_t(s.n_heads) * s.head_dim;
  if (qkv.size() < uint64_t(T) * 3 * C * 4) fail("qkv view smaller than T x 3C floats");
  if (s.kv_f16 && s.head_dim % 8) fail("f16 caches need head_dim % 8 == 0");
  if (k_cache.size() < kv_cache_bytes(s) || v_cache.size() < kv_cache_bytes(s))
    fail("cache view smaller than context x C elements");
}

// Shared memory the kernel's arrays take (shaders/attention.comp), for a merge chunk.
uint64_t shared_bytes(const AttentionKernel& k, uint32_t sg, AttentionShape s, uint32_t chunk) {
  if (k.wide) {  // sh_s, sh_red, sh_q, sh_part (common/attention_wide.glsl)
    const uint64_t vec = k.vec4 ? 4 : 1, hdv = s.head_dim / vec;
    return (uint64_t(s.context) + k.local + (1 + k.local / hdv) * hdv * vec) * 4;
  }
  if (k.subgroup) return uint64_t(k.local / sg) * (2 + s.head_dim) * 4;  // sh_m, sh_l, sh_acc
  return uint64_t(k.local) * (2 + chunk) * 4;                            // sh_m, sh_l, sh_acc
}

}  // namespace

void kv_append(Graph& g, View qkv, View step, View k_cache, View v_cache, uint32_t T, AttentionShape s,
               const std::string& name) {
  check_shape("kv_append", qkv, k_cache, v_cache, T, s);
  constexpr uint32_t local = 64;
  uint32_t C = s.n_heads * s.head_dim;
  // 16-byte copies where head slices and views allow them.
  const bool vec4 = s.head_dim % 4 == 0 && qkv.offset % 16 == 0 && k_cache.offset % 16 == 0 && v_cache.offset % 16 == 0;
  if (s.kv_f16 && !vec4) throw std::logic_error("kv_append: f16 caches need 16-byte aligned views");
  const uint32_t units = vec4 ? C / 4 : C;
  const char* shader = s.kv_f16 ? "kv_append.vec4_kvf16" : vec4 ? "kv_append.vec4" : "kv_append.scalar";
  const auto& p = g.context().pipelines().get({shader, {local, C, s.context, s.head_dim}, 4, 0});
  // Only positions pos0..pos0+T-1 are written, but pos0 is known only on the device, so the
  // whole cache views are declared written (a later attention read waits for them).
  g.add({name, &p,
         {{qkv, Access::Read}, {step, Access::Read}, {k_cache, Access::Write}, {v_cache, Access::Write}},
         {(units + local - 1) / local, T, 1},
         {}});
}

bool texel_views_ok(View qkv, View k_cache, View v_cache) {
  for (View v : {qkv, k_cache, v_cache})
    if (v.buffer->texel_view() == VK_NULL_HANDLE || v.offset % 16 != 0) return false;
  return true;
}

AttentionKernel attention_kernel(const vk::Context& ctx, AttentionShape s, bool texel_views, uint32_t T) {
  const auto& caps = ctx.caps();
  bool cpu = ctx.cpu_kernels();
  uint32_t sg = std::max(caps.subgroup_size, 1u);
  AttentionKernel k;
  if (cpu && texel_views && s.head_dim % 4 == 0 && caps.subgroup_arithmetic && sg <= caps.max_workgroup_invocations) {
    // One SIMD vector per (head, query), a key per lane, every key and value a vectorised
    // texel fetch, no per-key reduction across lanes.
    k.texel = k.vec4 = true;
    k.local = sg;
    // Queries per workgroup: sharing each fetched key between queries pays on long steps,
    // but lavapipe's JIT of the kernel grows fast with them (each query keeps its query and
    // accumulator in registers), paid by every cold start. So steps under 128 tokens take
    // one, which is the decode step's pipeline, compiled once for both
    // (bench/PERFORMANCE.md, "Prefill: attention").
    // (Models give CPU devices a scores scratch, and their steps of kTiledMinTokens or more
    // take kv_append_attention_tiled instead: faster, and its JIT is a fraction of this one's.)
    k.queries = T >= 128 ? 4 : 1;
    return k;
  }
  k.subgroup = caps.subgroup_arithmetic;
  if (k.subgroup && !cpu) {
    // GPUs: the wide kernel where its scores fit shared memory. Decode gets 512
    // invocations, prompt chunks, whose workgroups are many, 256 (measured on an H100:
    // bench/PERFORMANCE.md, "GPUs").
    AttentionKernel w;
    w.subgroup = w.wide = true;
    w.vec4 = s.head_dim % 4 == 0;  // (f16 caches: always, head_dim % 8 == 0)
    w.local = std::min(T == 1 ? 512u : 256u, caps.max_workgroup_invocations);
    const uint32_t hdv = w.vec4 ? s.head_dim / 4 : s.head_dim;
    if (hdv <= w.local && shared_bytes(w, sg, s, 0) <= caps.shared_memory_bytes) return w;
  }
  if (k.subgroup) {
    // vec4 when it still gives every lane work (lavapipe: 8 lanes; a 32-lane GPU subgroup
    // over a 64-dim head reads better as floats, two per lane).
    // f16 caches are read in vec4 units only.
    k.vec4 = s.kv_f16 || (s.head_dim % 4 == 0 && s.head_dim / 4 >= sg);
    // A CPU device runs a workgroup as one thread: one subgroup, no merge. A GPU gets
    // 256 invocations so that each head's keys are split over several subgroups.
    uint32_t nsg = cpu ? 1 : std::max(1u, 256 / sg);
    nsg = std::min(nsg, std::max(1u, caps.max_workgroup_invocations / sg));
    while (nsg > 1 && uint64_t(nsg) * (2 + s.head_dim) * 4 > caps.shared_memory_bytes) nsg /= 2;
    k.local = nsg * sg;
  } else {
    // One key per invocation: a CPU runs a workgroup as one SIMD of subgroup_size lanes,
    // a GPU gets 64 key streams per head.
    k.vec4 = s.head_dim % 4 == 0;
    k.local = std::min(cpu ? sg : 64u, caps.max_workgroup_invocations);
    while (k.local > 1 && uint64_t(k.local) * (2 + 4) * 4 > caps.shared_memory_bytes) k.local /= 2;
  }
  return k;
}

void attention_with(Graph& g, const AttentionKernel& k, bool append, View qkv, View step, View k_cache,
                    View v_cache, View out, uint32_t T, AttentionShape s, const std::string& name) {
  check_shape("attention", qkv, k_cache, v_cache, T, s);
  uint32_t C = s.n_heads * s.head_dim;
  if (out.size() < uint64_t(T) * C * 4) throw std::logic_error("attention: out view smaller than T x C floats");
  const auto& caps = g.context().caps();
  uint32_t sg = std::max(caps.subgroup_size, 1u);
  uint32_t vec = k.vec4 ? 4 : 1;
  auto fail = [&](const std::string& why) { throw std::logic_error("attention kernel: " + why); };
  if (k.vec4 && s.head_dim % 4) fail("vec4 loads need head_dim % 4 == 0");
  if (s.kv_f16 && !k.vec4) fail("f16 caches are read by the vec4 kernels only");
  if (k.local == 0 || k.local > caps.max_workgroup_invocations) fail("bad workgroup size");
  if (k.subgroup && (!caps.subgroup_arithmetic || k.local % sg)) fail("no subgroup arithmetic, or a partial subgroup");
  if (k.texel && (k.subgroup || !k.vec4 || k.local != sg || !caps.subgroup_arithmetic))
    fail("texel fetches are for the one-key-per-invocation vec4 kernel of one subgroup (with subgroup arithmetic)");
  if (k.texel && !texel_views_ok(qkv, k_cache, v_cache))
    fail("texel fetches need texel views of qkv and the caches, and 16-byte aligned views");
  if (k.queries < 1 || k.queries > 4 || (k.queries > 1 && !k.texel)) fail("queries per workgroup: 1-4, texel kernel only");
  if (k.rows && (!k.texel || !append)) fail("rows of several sequences: the texel kernel, appending");
  if (k.wide && (!k.subgroup || (k.vec4 ? s.head_dim / 4 : s.head_dim) > k.local))
    fail("the wide kernel needs subgroup arithmetic and a workgroup of head_dim / vec invocations or more");
  // Decode gets one query per workgroup (nothing to share a key with), as do rows of
  // different sequences.
  const uint32_t qb = T == 1 || k.rows ? 1 : k.queries;

  // The shared variant merges `chunk` dims per pass: as many as fit (a multiple of vec).
  uint32_t chunk = vec;
  if (!k.subgroup) {
    uint64_t fixed = uint64_t(k.local) * 2 * 4;
    if (fixed < caps.shared_memory_bytes)
      chunk = uint32_t(std::min<uint64_t>(s.head_dim, (caps.shared_memory_bytes - fixed) / (uint64_t(k.local) * 4)));
    chunk -= chunk % vec;
    if (chunk == 0) fail("workgroup too large for the device's shared memory");
  }
  if (shared_bytes(k, sg, s, chunk) > caps.shared_memory_bytes) fail("shared memory exceeds the device's");

  std::string shader = k.texel ? std::string(k.rows ? "attention.texel_rows" : "attention.texel")
                               : std::string("attention.") + (k.wide ? "wide" : k.subgroup ? "subgroup" : "shared") +
                                     (k.vec4 ? "_vec4" : "");
  if (s.kv_f16) shader += "_kvf16";
  float scale = 1.0f / std::sqrt(float(s.head_dim));
  std::vector<uint32_t> spec = {k.local, s.head_dim, C, s.context, vk::spec_f32(scale), sg, chunk, append ? 1u : 0u};
  if (k.texel) spec.push_back(qb);
  // The texel kernel also reads qkv and the caches through texel views of their whole
  // buffers (bindings 5-7), starting at the texels the push constants name.
  const auto& p = g.context().pipelines().get(k.texel ? vk::PipelineDesc{shader, spec, 8, 16, 0b11100000u}
                                                      : vk::PipelineDesc{shader, spec, 5, 0});
  // With append the caches are written too (rows pos0..pos0+T-1, known only on the device).
  Access cache_access = append ? Access::ReadWrite : Access::Read;
  std::vector<Arg> args = {{qkv, Access::Read},
                           {step, Access::Read},
                           {k_cache, cache_access},
                           {v_cache, cache_access},
                           {out, Access::Write}};
  std::vector<uint32_t> push;
  if (k.texel) {
    for (View v : {qkv, k_cache, v_cache}) {
      View t = v;
      t.texel = v.buffer->texel_view();
      args.push_back({t, Access::Read});
      push.push_back(static_cast<uint32_t>(v.offset / 16));
    }
    push.push_back(T);
  }
  g.add({name, &p, std::move(args), {s.n_heads, (T + qb - 1) / qb, 1}, std::move(push)});
}

bool attention_rows_ok(const vk::Context& ctx, View qkv, View k_pool, View v_pool, AttentionShape s) {
  return attention_kernel(ctx, s, texel_views_ok(qkv, k_pool, v_pool), 1).texel;
}

void kv_append_attention_rows(Graph& g, View qkv, View rows, View k_pool, View v_pool, View out, uint32_t B,
                              AttentionShape s, const std::string& name) {
  if (!attention_rows_ok(g.context(), qkv, k_pool, v_pool, s))
    throw std::logic_error("kv_append_attention_rows: the device or the views cannot run it (attention_rows_ok)");
  if (rows.size() < uint64_t(B) * sizeof(RowEntry))
    throw std::logic_error("kv_append_attention_rows: row table smaller than B entries");
  AttentionKernel k = attention_kernel(g.context(), s, true, 1);
  k.rows = true;
  attention_with(g, k, true, qkv, rows, k_pool, v_pool, out, B, s, name);
}

bool steps_match_rows(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, uint32_t T,
                      AttentionShape s) {
  if (takes_tiled_path(ctx, qkv, k_cache, v_cache, scores, T, s)) return false;
  const AttentionKernel k = attention_kernel(ctx, s, texel_views_ok(qkv, k_cache, v_cache), T);
  return k.texel && (T == 1 || k.queries == 1);
}

void attention(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T, AttentionShape s,
               const std::string& name) {
  const auto k = attention_kernel(g.context(), s, texel_views_ok(qkv, k_cache, v_cache), T);
  attention_with(g, k, false, qkv, step, k_cache, v_cache, out, T, s, name);
}

bool takes_tiled_path(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, uint32_t T,
                      AttentionShape s) {
  return scores.buffer && T >= kTiledMinTokens && attention_tiled_ok(ctx, qkv, k_cache, v_cache, scores, s);
}

void kv_append_attention(Graph& g, View qkv, View step, View k_cache, View v_cache, View out, uint32_t T,
                         AttentionShape s, const std::string& name, View scores) {
  if (takes_tiled_path(g.context(), qkv, k_cache, v_cache, scores, T, s)) {
    kv_append_attention_tiled(g, qkv, step, k_cache, v_cache, scores, out, T, s, name);
    return;
  }
  const auto k = attention_kernel(g.context(), s, texel_views_ok(qkv, k_cache, v_cache), T);
  attention_with(g, k, true, qkv, step, k_cache, v_cache, out, T, s, name);
}

namespace {
uint32_t scores_row(AttentionShape s) { return (s.context + 3) / 4 * 4; }
}  // namespace

uint64_t attention_tiled_scratch_bytes(AttentionShape s, uint32_t max_tokens) {
  return uint64_t(s.n_heads) * max_tokens * scores_row(s) * 4;
}

bool attention_tiled_ok(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, AttentionShape s) {
  const auto& caps = ctx.caps();
  const uint32_t sg = caps.subgroup_size;
  if (!(caps.subgroup_shuffle && sg >= 4 && sg <= 16 && sg <= caps.max_workgroup_invocations && s.head_dim % 4 == 0))
    return false;
  // llvmpipe runs at most 65535 loop iterations per invocation over all its loops and
  // silently leaves a loop past that (ops/sample.cpp). A scores workgroup takes the keys
  // 4 * sg at a time, each pass head_dim / 4 fetch iterations (and the stores); a values
  // workgroup 8 keys per iteration (counted as 4 here, to spare a margin).
  const uint64_t key_blocks = (s.context + 4 * sg - 1) / (4 * sg);
  if (key_blocks * (s.head_dim / 4 + 4 * sg + 1) > 60000 || s.context / 4 + sg > 60000) return false;
  return texel_views_ok(qkv, k_cache, v_cache) && scores.buffer && scores.buffer->texel_view() != VK_NULL_HANDLE &&
         scores.offset % 16 == 0;
}

namespace {
// What the tiled passes need of their views; throws std::logic_error naming the first miss.
void check_tiled(const vk::Context& ctx, View qkv, View k_cache, View v_cache, View scores, View out, uint32_t T,
                 AttentionShape s) {
  check_shape("attention_tiled", qkv, k_cache, v_cache, T, s);
  if (out.size() < uint64_t(T) * s.n_heads * s.head_dim * 4)
    throw std::logic_error("attention_tiled: out view smaller than T x C floats");
  if (!attention_tiled_ok(ctx, qkv, k_cache, v_cache, scores, s))
    throw std::logic_error("attention_tiled: the device or the views cannot run it");
  if (scores.size() < attention_tiled_scratch_bytes(s, T))
    throw std::logic_error("attention_tiled: scores view smaller than n_heads x T x context floats");
}
}  // namespace

void kv_append_attention_tiled(Graph& g, View qkv, View step, View k_cache, View v_cache, View scores, View out,
                               uint32_t T, AttentionShape s, const std::string& name) {
  check_tiled(g.context(), qkv, k_cache, v_cache, scores, out, T, s);  // before anything is recorded
  kv_append(g, qkv, step, k_cache, v_cache, T, s, name + ".kv_append");
  attention_tiled(g, qkv, step, k_cache, v_cache, scores, out, T, s, name);
}

void attention_tiled(Graph& g, View qkv, View step, View k_cache, View v_cache, View scores, View out, uint32_t T,
                     AttentionShape s, const std::string& name) {
  check_tiled(g.context(), qkv, k_cache, v_cache, scores, out, T, s);
  const uint32_t C = s.n_heads * s.head_dim;
  const uint32_t local = g.context().caps().subgroup_size;
  // attention.comp's constants 0-9; 5-8 (the other variants' SG, CHUNK, APPEND, QB) unused.
  const std::vector<uint32_t> spec = {local, s.head_dim, C, s.context, vk::spec_f32(1.0f / std::sqrt(float(s.head_dim))),
                                      local, 4, 0, 1, scores_row(s)};
  auto texel = [](View v) {
    v.texel = v.buffer->texel_view();
    return v;
  };
  const std::vector<uint32_t> push = {static_cast<uint32_t>(qkv.offset / 16), static_cast<uint32_t>(k_cache.offset / 16),
                                      static_cast<uint32_t>(v_cache.offset / 16),
                                      static_cast<uint32_t>(scores.offset / 16), T};
  const uint32_t query_blocks = (T + local - 1) / local;
  // Bindings a pass does not use get views it reads anyway (no extra hazards).
  const std::string kv = s.kv_f16 ? "_kvf16" : "";
  const auto& scores_pass = g.context().pipelines().get({"attention.tiled_scores" + kv, spec, 7, 20, 0b1111u});
  g.add({name + ".scores", &scores_pass,
         {{texel(qkv), Access::Read}, {texel(k_cache), Access::Read}, {texel(v_cache), Access::Read},
          {texel(v_cache), Access::Read}, {step, Access::Read}, {scores, Access::Write}, {qkv, Access::Read}},
         {query_blocks, s.n_heads, 1},
         push});
  const uint32_t dim_blocks = (s.head_dim / 4 + local - 1) / local;
  const auto& values_pass = g.context().pipelines().get({"attention.tiled_values" + kv, spec, 7, 20, 0b1111u});
  g.add({name + ".values", &values_pass,
         {{texel(qkv), Access::Read}, {texel(k_cache), Access::Read}, {texel(v_cache), Access::Read},
          {texel(scores), Access::Read}, {step, Access::Read}, {scores, Access::Read}, {out, Access::Write}},
         {dim_blocks, query_blocks, s.n_heads},
         push});
}

}  // namespace gptvk::ops
