#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <optional>

#include "tests/reference/attention.hpp"
#include "engine/dtype.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/step.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::AttentionShape;

namespace {

// Tolerance, relative to the reference's largest |output|. The GPU works in f32. A score is
// an f32 dot product of hd terms, so its rounding error is about eps * sum |q_d k_d|: with
// the scaled-up keys and queries here up to ~5e-6 on a score of tens, which becomes the same
// relative error on that key's softmax weight after exp. The online softmax adds a rounding
// per rescale, and the output, a convex combination of values with |v| <= 1, inherits
// errors of the same order: measured up to ~5e-6 of max |out| on both kernel families.
// 2e-5 leaves margin for other exp implementations while any real mistake (a wrong or
// missing key, a missed rescale, an off-by-one in the causal mask) moves outputs by 1e-3
// or more.
constexpr double kTolerance = 2e-5;

size_t emb(AttentionShape s) { return size_t(s.n_heads) * s.head_dim; }

// Random q/k/v for tokens [pos0, pos0 + T): uniform in [-1, 1], with some keys and queries
// scaled up so that some heads get a sharply peaked softmax (scores of tens) while others
// stay nearly flat (scores well below 1).
std::vector<float> make_qkv(uint32_t T, uint32_t pos0, AttentionShape s, uint32_t seed) {
  const size_t C = emb(s), hd = s.head_dim;
  auto v = test::random_floats(T * 3 * C, seed);
  for (uint32_t t = 0; t < T; ++t) {
    uint32_t pos = pos0 + t;
    for (uint32_t h = 0; h < s.n_heads; ++h) {
      float qscale = (h % 3 == 0) ? 4.0f : (h % 3 == 1 ? 1.0f : 0.1f);  // peaked / mild / flat heads
      float kscale = (pos % 7 == 3) ? 6.0f : (pos % 13 == 5 ? 12.0f : 1.0f);
      for (size_t d = 0; d < hd; ++d) {
        v[t * 3 * C + h * hd + d] *= qscale;
        v[t * 3 * C + C + h * hd + d] *= kscale;
      }
    }
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Device state for one layer's attention: a step buffer, the qkv input for up to max_t
// tokens, the two caches (views at a non-zero, aligned offset of a bigger buffer, as a
// multi-layer cache would hold them; unwritten rows are NaN so reading one shows up) and
// the output. qkv and the cache buffer get texel views where the device can make them, as
// the model's do, so CPU devices run the texel kernel by default.
struct Rig {
  AttentionShape s;
  uint32_t max_t;
  vk::Buffer step, qkv, cache, out, scores;
  View k_view, v_view, scores_view;
  std::vector<float> k_host, v_host;  // the reference's copy of the caches

  Rig(vk::Context& ctx, AttentionShape shape, uint32_t max_tokens) : s(shape), max_t(max_tokens) {
    const size_t C = emb(s);
    uint64_t align = std::max<uint64_t>(ctx.caps().storage_offset_alignment, 16);
    uint64_t layer = align_up(ops::kv_cache_bytes(s), align);
    step = vk::Buffer(ctx, sizeof(StepState), vk::Memory::Host, "step");
    qkv = vk::Buffer(ctx, uint64_t(max_t) * 3 * C * 4);
    out = vk::Buffer(ctx, uint64_t(max_t) * C * 4);
    cache = vk::Buffer(ctx, 3 * layer);  // [unused layer][k][v]
    // NaN everywhere: f32 quiet NaNs, or pairs of f16 ones (0x7e00).
    std::vector<uint32_t> nan(cache.size() / 4, s.kv_f16 ? 0x7e007e00u : 0x7fc00000u);
    cache.upload(nan.data(), cache.size());
    qkv.try_create_texel_view();
    cache.try_create_texel_view();
    // The tiled kernel's scratch at a 16-byte offset of its buffer.
    scores = vk::Buffer(ctx, ops::attention_tiled_scratch_bytes(s, max_t) + align);
    scores.try_create_texel_view();
    scores_view = View{&scores, align, 0};
    k_view = View{&cache, layer, ops::kv_cache_bytes(s)};
    v_view = View{&cache, 2 * layer, ops::kv_cache_bytes(s)};
    k_host.assign(s.context * C, 0.0f);
    v_host.assign(s.context * C, 0.0f);
    set_pos(0);
  }

  void set_pos(uint32_t pos) {
    StepState st{pos, 0, {0, 0}};
    std::memcpy(step.mapped(), &st, sizeof st);
  }

  // Uploads this step's qkv, runs the graph at pos0, and returns max error vs the reference.
  double run_step(Graph& g, uint32_t pos0, uint32_t T, uint32_t seed) {
    auto x = make_qkv(T, pos0, s, seed);
    qkv.upload(x.data(), x.size() * 4);
    set_pos(pos0);
    g.run();
    cpu::kv_append(x, k_host, v_host, pos0, T, s);
    auto want = cpu::attention(x, k_host, v_host, pos0, T, s);
    return test::max_rel_error(test::download(out, T * emb(s)), want);
  }

  // The whole cache buffer as floats (f16 caches widened).
  std::vector<float> cache_contents() const {
    if (!s.kv_f16) {
      std::vector<float> all(cache.size() / 4);
      cache.download(all.data(), cache.size());
      return all;
    }
    std::vector<uint16_t> halves(cache.size() / 2);
    cache.download(halves.data(), cache.size());
    std::vector<float> all(halves.size());
    for (size_t i = 0; i < halves.size(); ++i) all[i] = f16_to_f32(halves[i]);
    return all;
  }

  // Cache positions 0..filled-1 of every head hold exactly what was appended (f16 caches:
  // rounded to nearest even, as cpu::kv_append), where kv_cache_index puts them; the rest, and
  // the unused layer before the caches, are untouched (NaN).
  bool cache_matches(uint32_t filled) const {
    const auto all = cache_contents();
    const size_t elem = s.kv_f16 ? 2 : 4;
    for (size_t i = 0; i < k_view.offset / elem; ++i)
      if (!std::isnan(all[i])) return false;
    for (int which = 0; which < 2; ++which) {
      const auto& host = which ? v_host : k_host;
      size_t base = (which ? v_view.offset : k_view.offset) / elem;
      for (uint32_t h = 0; h < s.n_heads; ++h)
        for (uint32_t j = 0; j < s.context; ++j)
          for (uint32_t d = 0; d < s.head_dim; ++d) {
            const uint64_t i = kv_cache_index(s, h, j, d);
            float got = all[base + i];
            if (j < filled ? got != host[i] : !std::isnan(got)) return false;
          }
    }
    return true;
  }
};

std::string label_of(const std::string& ctx, AttentionShape s, uint32_t T) {
  return ctx + " heads=" + std::to_string(s.n_heads) + " hd=" + std::to_string(s.head_dim) +
         " ctx=" + std::to_string(s.context) + (s.kv_f16 ? " kv=f16" : "") + " T=" + std::to_string(T);
}

// The shape with f16 caches.
AttentionShape f16_cache(AttentionShape s) {
  s.kv_f16 = true;
  return s;
}

// The shapes the sequence tests share (each shape is a set of pipelines for lavapipe to
// compile, seconds each): head dims of 32 to 128 (8 to 32 vec4s against 8-lane subgroups),
// 25 heads, and a context of 1024.
const AttentionShape kHd32{3, 32, 160}, kHd48{5, 48, 80}, kHd64{2, 64, 1024}, kHeads25{25, 80, 160},
    kHd128{3, 128, 300};

// Which dispatches a step records: kv_append + attention, the fused kv_append_attention, or
// either with a forced kernel.
struct Mode {
  std::string name;
  bool fused = false;
  std::optional<ops::AttentionKernel> kernel;
  bool tiled = false;  // kv_append_attention_tiled (CPU devices' prefill path)
};
const Mode kSeparate{"separate", false, {}}, kFused{"fused", true, {}}, kTiled{"tiled", true, {}, true};

// The modes a device runs: the tiled one only where it can.
std::vector<Mode> modes_for(vk::Context& ctx, AttentionShape s) {
  std::vector<Mode> modes = {kSeparate, kFused};
  Rig probe(ctx, {s.n_heads, s.head_dim, 4}, 1);
  if (ops::attention_tiled_ok(ctx, whole(probe.qkv), probe.k_view, probe.v_view, probe.scores_view, probe.s))
    modes.push_back(kTiled);
  return modes;
}

// The modes the sequence tests run. The fallback device's kernels are the slowest for
// lavapipe to compile (3.5-10 s a pipeline at head dim 128), so there each shape runs either
// the separate or the fused mode, alternating over head dims and cache types: each mode
// meets f32 and f16 caches, head dims of 4 to 128 and the 1024-token context.
std::vector<Mode> sequence_modes(vk::Context& ctx, AttentionShape s) {
  auto modes = modes_for(ctx, s);
  if (&ctx == &test::fallback_context())
    std::erase_if(modes, [&](const Mode& m) { return !m.tiled && m.fused != ((s.head_dim / 16 + s.kv_f16) % 2 == 1); });
  return modes;
}

void record_step(Graph& g, Rig& rig, uint32_t T, const Mode& mode) {
  View qkv = whole(rig.qkv), step = whole(rig.step), out = whole(rig.out);
  if (mode.tiled) {
    ops::kv_append_attention_tiled(g, qkv, step, rig.k_view, rig.v_view, rig.scores_view, out, T, rig.s);
  } else if (mode.kernel) {
    if (!mode.fused) ops::kv_append(g, qkv, step, rig.k_view, rig.v_view, T, rig.s);
    ops::attention_with(g, *mode.kernel, mode.fused, qkv, step, rig.k_view, rig.v_view, out, T, rig.s, "attention");
  } else if (mode.fused) {
    ops::kv_append_attention(g, qkv, step, rig.k_view, rig.v_view, out, T, rig.s);
  } else {
    ops::kv_append(g, qkv, step, rig.k_view, rig.v_view, T, rig.s);
    ops::attention(g, qkv, step, rig.k_view, rig.v_view, out, T, rig.s);
  }
  g.record();
}

// A sequence as a model runs it: `chunks` prefill chunks of `chunk_t` tokens by ONE recorded
// graph replayed at pos0 = 0, chunk_t, 2 chunk_t, ... (chunk_t may be 0: no prefill), then
// `steps` decode tokens by ONE recorded T = 1 graph replayed while the host advances
// step_pos. Every step's output is compared with the CPU reference, and at the end the
// caches must hold exactly the appended rows.
void check_sequence(vk::Context& ctx, const std::string& ctx_label, AttentionShape s, const Mode& mode,
                    uint32_t chunk_t, uint32_t chunks, uint32_t steps) {
  std::string what = label_of(ctx_label + " " + mode.name, s, chunk_t);
  auto t0 = std::chrono::steady_clock::now();
  Rig rig(ctx, s, std::max(chunk_t, 1u));
  uint32_t pos = 0;
  double worst = 0;
  if (chunk_t && chunks) {
    Graph pre(ctx);
    record_step(pre, rig, chunk_t, mode);
    for (uint32_t k = 0; k < chunks; ++k, pos += chunk_t) {
      double err = rig.run_step(pre, pos, chunk_t, 7 + pos);
      BOOST_TEST(err < kTolerance, what << " chunk at pos " << pos << " rel err " << err);
      worst = std::max(worst, err);
    }
  }
  if (steps) {
    Graph dec(ctx);
    record_step(dec, rig, 1, mode);
    for (uint32_t i = 0; i < steps; ++i, ++pos) {
      double err = rig.run_step(dec, pos, 1, 1000 + pos);
      BOOST_TEST(err < kTolerance, what << " decode at pos " << pos << " rel err " << err);
      worst = std::max(worst, err);
    }
  }
  BOOST_TEST(rig.cache_matches(pos), what << " cache contents after " << pos << " tokens");
  BOOST_TEST_MESSAGE(what << " chunks=" << chunks << " steps=" << steps << ": worst rel err " << worst << " ("
                          << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s)");
}

// lavapipe compiles each pipeline at its first dispatch, one at a time on its device's queue
// thread, and most of a cold run is that. Each test context is a device of its own, so
// while this thread checks the native one, another thread runs the same steps once on the
// fallback device to have its pipelines compiled, and the fallback's checks find them
// ready. That thread checks nothing (Boost.Test's assertions are single-threaded); errors
// reach the caller through the future. Call get() before using the fallback context.
struct WarmStep {
  AttentionShape s;
  uint32_t chunk_t;  // a prefill chunk's tokens (0: none)
  bool decode;       // and the one-token step after it
};

std::future<void> warm_fallback(std::vector<WarmStep> steps) {
  vk::Context& ctx = test::fallback_context();  // made here, on the test's thread
  return std::async(std::launch::async, [&ctx, steps = std::move(steps)] {
    for (const WarmStep& w : steps)
      for (const Mode& mode : sequence_modes(ctx, w.s)) {
        Rig rig(ctx, w.s, std::max(w.chunk_t, 1u));
        for (uint32_t T : {w.chunk_t, w.decode ? 1u : 0u}) {
          if (T == 0) continue;
          Graph g(ctx);
          record_step(g, rig, T, mode);
          g.run();
        }
      }
  });
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(attention, test::NoValidationMessages)

// Prefill at pos0 = 0: kv_append then attention in one graph (or the fused dispatch), every
// query attending to its causal prefix of the step's own keys.
BOOST_AUTO_TEST_CASE(prefill_matches_cpu) {
  struct Case {
    AttentionShape s;
    uint32_t T;
  };
  // Steps of 128 tokens or more are the only ones whose texel kernel (CPU devices without
  // the tiled path) serves 4 queries per workgroup, a pipeline lavapipe takes up to a minute
  // to compile with f16 caches: one shape runs them (129: a partial last block of queries,
  // and of the tiled path's subgroup-wide blocks), the rest stay under 128.
  const Case cases[] = {{kHd32, 129}, {kHd48, 70}, {kHd64, 7}, {kHeads25, 33}, {kHd128, 1}, {{4, 30, 90}, 33},
                        {{2, 4, 50}, 50},
                        // f16 caches
                        {f16_cache(kHd32), 129}, {f16_cache(kHd64), 7}, {f16_cache(kHd48), 70}};
  std::vector<WarmStep> warm;
  for (const auto& c : cases) warm.push_back({c.s, c.T, false});
  std::future<void> fallback_ready = warm_fallback(std::move(warm));
  for (auto [label, ctx] : test::all_contexts()) {
    if (ctx == &test::fallback_context()) fallback_ready.get();
    for (const auto& c : cases)
      for (const auto& mode : sequence_modes(*ctx, c.s)) check_sequence(*ctx, label, c.s, mode, c.T, 1, 0);
  }
}

// Prefill, then decode one token at a time by replaying ONE recorded T = 1 graph. Ten
// chunks of 100 tokens take the decode to the end of a 1024 context (chunks under 128
// tokens share the decode step's texel pipeline on CPU devices: see prefill_matches_cpu).
BOOST_AUTO_TEST_CASE(decode_replays_one_graph) {
  struct Case {
    AttentionShape s;
    uint32_t chunk, chunks, steps;
  };
  // f16 caches on shapes whose pipelines the other cases compile too (chunked_prefill_at_
  // nonzero_pos's f16 kHd32): a fused f16 kernel of a new shape is up to a minute of
  // lavapipe compiling.
  const Case cases[] = {{kHd128, 0, 0, 40},           {kHd48, 7, 1, 30},
                        {kHd64, 100, 10, 24},          {kHeads25, 120, 1, 20},
                        {f16_cache(kHd64), 100, 10, 24}, {f16_cache(kHd32), 120, 1, 20}};
  std::vector<WarmStep> warm;
  for (const auto& c : cases) warm.push_back({c.s, c.chunks ? c.chunk : 0, c.steps > 0});
  std::future<void> fallback_ready = warm_fallback(std::move(warm));
  for (auto [label, ctx] : test::all_contexts()) {
    if (ctx == &test::fallback_context()) fallback_ready.get();
    for (const auto& c : cases)
      for (const auto& mode : sequence_modes(*ctx, c.s))
        check_sequence(*ctx, label, c.s, mode, c.chunk, c.chunks, c.steps);
  }
}

// Chunked prefill: one recorded T-token graph replayed at pos0 = 0, T, 2T, ... so queries
// attend to earlier chunks from the cache plus the causal part of their own chunk; then a
// few decode steps.
BOOST_AUTO_TEST_CASE(chunked_prefill_at_nonzero_pos) {
  struct Case {
    AttentionShape s;
    uint32_t T, chunks;
  };
  const Case cases[] = {{kHd64, 70, 4}, {kHd32, 7, 5}, {kHeads25, 40, 3}, {f16_cache(kHd64), 70, 4},
                        {f16_cache(kHd32), 7, 5}};
  std::vector<WarmStep> warm;
  for (const auto& c : cases) warm.push_back({c.s, c.T, true});
  std::future<void> fallback_ready = warm_fallback(std::move(warm));
  for (auto [label, ctx] : test::all_contexts()) {
    if (ctx == &test::fallback_context()) fallback_ready.get();
    for (const auto& c : cases)
      for (const auto& mode : sequence_modes(*ctx, c.s)) check_sequence(*ctx, label, c.s, mode, c.T, c.chunks, 3);
  }
}

// Every kernel path on every device: the caps pick one path per device, so the others (the
// multi-subgroup merge a GPU uses, float loads, odd workgroup sizes) are forced here.
BOOST_AUTO_TEST_CASE(every_kernel_path) {
  // Small head dims: lavapipe's compile time grows with them (a fused multi-query texel
  // kernel at 80 or 128 dims took up to a minute); 40 and 48 are 10 and 12 vec4s, neither a
  // whole number of 8-lane subgroups.
  const AttentionShape shapes[] = {kHd48, {3, 40, 100}, {2, 24, 100}, f16_cache({3, 40, 100})};
  for (auto [label, ctx] : test::all_contexts()) {
    const auto& caps = ctx->caps();
    uint32_t sg = caps.subgroup_size;
    std::vector<ops::AttentionKernel> kernels = {
        {false, true, 8}, {false, false, 5}, {false, true, 64}, {false, false, 64}};
    if (caps.texel_uvec4 && caps.subgroup_arithmetic)
      for (uint32_t queries : {1u, 2u, 3u}) kernels.push_back({false, true, sg, true, queries});  // 4: the default from 128 tokens
    if (caps.subgroup_arithmetic)
      for (ops::AttentionKernel k : {ops::AttentionKernel{true, true, sg}, {true, false, sg},
                                     {true, true, 8 * sg}, {true, false, 3 * sg}})
        if (k.local <= caps.max_workgroup_invocations) kernels.push_back(k);
    // The wide kernel (GPUs): decode's 1024 invocations, prompt chunks' 256, and workgroups
    // barely wider than a head (vec4: 48 / 4 = 12 lanes per value row, 5 key streams of 64).
    // Fewer invocations than a value row has elements are refused before recording.
    if (caps.subgroup_arithmetic) {
      const AttentionShape wide_head{2, 128, 200};
      Rig rig(*ctx, wide_head, 1);
      Graph g(*ctx);
      BOOST_CHECK_THROW(ops::attention_with(g, {true, false, 64, false, 1, true}, false, whole(rig.qkv),
                                            whole(rig.step), rig.k_view, rig.v_view, whole(rig.out), 1, wide_head,
                                            "attention"),
                        std::logic_error);
      BOOST_TEST(g.size() == 0u);
    }
    if (caps.subgroup_arithmetic)
      for (uint32_t local : {1024u, 256u, 64u})
        for (bool vec4 : {true, false})
          if (local <= caps.max_workgroup_invocations) kernels.push_back({true, vec4, local, false, 1, true});
    // Each (kernel, fused) pair runs two consecutive shapes, in rotation: a kernel meets
    // three of the four, its neighbours the others (each shape is a set of pipelines to
    // compile, 0.2-5 s each on lavapipe, so crossing them all would take minutes).
    for (size_t ki = 0; ki < kernels.size(); ++ki)
      for (bool fused : {false, true}) {
        const auto& k = kernels[ki];
        const size_t first = 2 * ki + (fused ? 1 : 0);
        std::string kind = k.texel ? "texel queries=" + std::to_string(k.queries)
                                   : std::string(k.wide ? "wide" : k.subgroup ? "subgroup" : "shared") +
                                         (k.vec4 ? "_vec4" : "");
        Mode mode{kind + " local=" + std::to_string(k.local) + (fused ? " fused" : ""), fused, k};
        for (size_t si : {first % std::size(shapes), (first + 1) % std::size(shapes)}) {
          const AttentionShape& s = shapes[si];
          if ((k.vec4 && s.head_dim % 4) || (s.kv_f16 && !k.vec4)) continue;
          // Two or three queries per texel workgroup are no product path's (the caps pick one,
          // or four from 128 tokens; prefill_matches_cpu runs both with f16 caches), and their
          // fused f16 kernel alone is a minute of lavapipe compiling: f32 caches only.
          if (k.texel && k.queries != 1 && s.kv_f16) continue;
          check_sequence(*ctx, label, s, mode, 37, 2, 5);
        }
      }
  }
}

// The tiled path runs only where it can: 16-byte aligned texel views, head_dim % 4 == 0,
// and few enough loop iterations per invocation for llvmpipe's cap; a forced call refuses
// the rest, and a scratch too small for the step.
BOOST_AUTO_TEST_CASE(tiled_path_refuses_what_it_cannot_run) {
  auto& ctx = test::context();
  const AttentionShape s{2, 32, 16};
  Rig rig(ctx, s, 4);
  View qkv = whole(rig.qkv), step = whole(rig.step), out = whole(rig.out);
  if (!ops::attention_tiled_ok(ctx, qkv, rig.k_view, rig.v_view, rig.scores_view, s)) {
    BOOST_TEST_MESSAGE("skipped: the device has no tiled attention path");
    return;
  }
  View odd = rig.scores_view;
  odd.offset -= 4;
  BOOST_TEST(!ops::attention_tiled_ok(ctx, qkv, rig.k_view, rig.v_view, odd, s));
  BOOST_TEST(!ops::attention_tiled_ok(ctx, qkv, rig.k_view, rig.v_view, rig.scores_view, {2, 30, 16}));
  BOOST_TEST(!ops::attention_tiled_ok(ctx, qkv, rig.k_view, rig.v_view, rig.scores_view, {2, 128, 40000}));
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::kv_append_attention_tiled(g, qkv, step, rig.k_view, rig.v_view, odd, out, 4, s),
                    std::logic_error);
  View small = rig.scores_view;
  small.bytes = ops::attention_tiled_scratch_bytes(s, 4) - 16;
  BOOST_CHECK_THROW(ops::kv_append_attention_tiled(g, qkv, step, rig.k_view, rig.v_view, small, out, 4, s),
                    std::logic_error);
  BOOST_TEST(g.size() == 0u);
  ops::kv_append_attention_tiled(g, qkv, step, rig.k_view, rig.v_view, rig.scores_view, out, 4, s);
  BOOST_TEST(g.size() == 3u);  // kv_append, scores, values
}

// A kernel the device cannot run is refused before anything is recorded.
BOOST_AUTO_TEST_CASE(refuses_impossible_kernels) {
  auto& ctx = test::fallback_context();  // no subgroup arithmetic, 16 KiB shared memory
  const AttentionShape s{2, 30, 16};
  Rig rig(ctx, s, 1);
  Graph g(ctx);
  auto add = [&](ops::AttentionKernel k) {
    ops::attention_with(g, k, false, whole(rig.qkv), whole(rig.step), rig.k_view, rig.v_view, whole(rig.out), 1, s,
                        "attention");
  };
  BOOST_CHECK_THROW(add({true, false, 8}), std::logic_error);    // subgroup path without subgroup arithmetic
  BOOST_CHECK_THROW(add({false, true, 8}), std::logic_error);    // vec4 with head_dim % 4 != 0
  BOOST_CHECK_THROW(add({false, false, 4096}), std::logic_error);  // workgroup too large
  BOOST_CHECK_THROW(add({true, false, 16, false, 1, true}), std::logic_error);  // wide without subgroup arithmetic
  add({false, false, 8});
  BOOST_TEST(g.size() == 1u);
}

// f16 caches: head_dim % 8 == 0, read by the vec4 kernels only, and views of the f16 size.
BOOST_AUTO_TEST_CASE(f16_caches_refuse_what_they_cannot_hold) {
  auto& ctx = test::context();
  const AttentionShape s = f16_cache({2, 32, 16});
  Rig rig(ctx, s, 1);
  View qkv = whole(rig.qkv), step = whole(rig.step), out = whole(rig.out);
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::kv_append(g, qkv, step, rig.k_view, rig.v_view, 1, f16_cache({2, 36, 16})), std::logic_error);
  BOOST_CHECK_THROW(ops::attention_with(g, {false, false, 8}, true, qkv, step, rig.k_view, rig.v_view, out, 1, s, "a"),
                    std::logic_error);  // scalar loads
  View short_k = rig.k_view;
  short_k.bytes -= 16;
  BOOST_CHECK_THROW(ops::kv_append_attention(g, qkv, step, short_k, rig.v_view, out, 1, s), std::logic_error);
  BOOST_TEST(g.size() == 0u);
  // The f32 shape's caches are twice the size: its views would not fit.
  BOOST_CHECK_THROW(ops::kv_append(g, qkv, step, rig.k_view, rig.v_view, 1, {2, 32, 16}), std::logic_error);
  BOOST_TEST(ops::kv_cache_bytes(s) * 2 == ops::kv_cache_bytes({2, 32, 16}));
  BOOST_TEST(ops::attention_kernel(ctx, s).vec4);
}

// f16 caches hold each key and value rounded to nearest even (ties to even, subnormals in
// 2^-24 steps) and clamped to +-65504, by every appending kernel alike: the shaders encode
// with integer operations (common/kv_cache.glsl), since Vulkan lets packHalf2x16 round
// either way and a driver may fold a pack and unpack into nothing.
BOOST_AUTO_TEST_CASE(f16_caches_round_to_nearest_even) {
  const float edge[] = {1.0f + 0x1p-11f,  1.0f + 3 * 0x1p-11f, -(2.0f + 0x1p-10f), 0x1p-20f,  3 * 0x1p-25f,
                        -5 * 0x1p-25f,    0x1p-14f - 0x1p-26f, 65519.0f,           65520.0f,  -1e6f,
                        0.1f,             -0.0f,               2049.0f,            0x1p-30f,  1.0f - 0x1p-12f};
  for (auto [label, ctx] : test::all_contexts()) {
    const AttentionShape s = f16_cache(kHd32);
    for (const Mode& mode : modes_for(*ctx, s)) {
      Rig rig(*ctx, s, 2);
      std::vector<float> x(2 * 3 * emb(s));
      for (size_t i = 0; i < x.size(); ++i) x[i] = edge[i % std::size(edge)];
      rig.qkv.upload(x.data(), x.size() * 4);
      rig.set_pos(3);
      Graph g(*ctx);
      record_step(g, rig, 2, mode);
      g.run();
      cpu::kv_append(x, rig.k_host, rig.v_host, 3, 2, s);
      // Positions 0-2 were never written: NaN in the caches; fill the reference alike.
      for (uint32_t h = 0; h < s.n_heads; ++h)
        for (uint32_t j = 0; j < 3; ++j)
          for (uint32_t d = 0; d < s.head_dim; ++d)
            rig.k_host[kv_cache_index(s, h, j, d)] = rig.v_host[kv_cache_index(s, h, j, d)] = NAN;
      const auto all = rig.cache_contents();
      bool exact = true;
      for (int which = 0; which < 2; ++which) {
        const auto& host = which ? rig.v_host : rig.k_host;
        const size_t base = (which ? rig.v_view.offset : rig.k_view.offset) / 2;
        for (uint32_t h = 0; h < s.n_heads; ++h)
          for (uint32_t j = 3; j < 5; ++j)
            for (uint32_t d = 0; d < s.head_dim; ++d) {
              const uint64_t i = kv_cache_index(s, h, j, d);
              exact = exact && std::signbit(all[base + i]) == std::signbit(host[i]) && all[base + i] == host[i];
            }
      }
      BOOST_TEST(exact, label << " " << mode.name);
    }
  }
}

// The texel kernel needs texel views of qkv and both caches at 16-byte aligned offsets; the
// default choice falls back to storage loads without them, a forced texel kernel is refused.
BOOST_AUTO_TEST_CASE(texel_kernel_needs_aligned_texel_views,
                     *test::device_has([](vk::Context& c) { return c.caps().texel_uvec4 && c.caps().subgroup_arithmetic; },
                                       "has no uvec4 texel views or subgroup arithmetic: no texel kernel")) {
  auto& ctx = test::context();
  const AttentionShape s{2, 32, 16};
  Rig rig(ctx, s, 1);
  const ops::AttentionKernel texel{false, true, ctx.caps().subgroup_size, true};
  View qkv = whole(rig.qkv), step = whole(rig.step), out = whole(rig.out);
  View k_odd = rig.k_view;
  k_odd.offset -= 4;  // still a valid storage range, but not on a texel boundary
  vk::Buffer plain_qkv(ctx, rig.qkv.size());  // no texel view
  BOOST_TEST(ops::texel_views_ok(qkv, rig.k_view, rig.v_view));
  BOOST_TEST(!ops::texel_views_ok(qkv, k_odd, rig.v_view));
  BOOST_TEST(!ops::texel_views_ok(whole(plain_qkv), rig.k_view, rig.v_view));
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::attention_with(g, texel, false, qkv, step, k_odd, rig.v_view, out, 1, s, "a"),
                    std::logic_error);
  BOOST_CHECK_THROW(ops::attention_with(g, texel, true, whole(plain_qkv), step, rig.k_view, rig.v_view, out, 1, s, "a"),
                    std::logic_error);
  BOOST_CHECK_THROW(ops::attention_with(g, {false, true, 2 * texel.local, true}, true, qkv, step, rig.k_view,
                                        rig.v_view, out, 1, s, "a"),
                    std::logic_error);  // more than one subgroup
  BOOST_CHECK_THROW(ops::attention_with(g, {false, true, texel.local, true, 5}, true, qkv, step, rig.k_view,
                                        rig.v_view, out, 1, s, "a"),
                    std::logic_error);  // more queries per workgroup than the shader holds
  BOOST_TEST(g.size() == 0u);
  bool cpu = ctx.cpu_kernels();
  BOOST_TEST(ops::attention_kernel(ctx, s, true).texel == cpu);
  BOOST_TEST(!ops::attention_kernel(ctx, s, false).texel);
  // Short steps share the decode step's one-query pipeline; long ones serve four queries.
  if (cpu) {
    BOOST_TEST(ops::attention_kernel(ctx, s, true, 127).queries == 1u);
    BOOST_TEST(ops::attention_kernel(ctx, s, true, 128).queries == 4u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
