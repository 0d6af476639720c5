// Whole models against PyTorch: every case under tests/fixtures/models/
// (tests/support/model_cases.hpp, with the tolerances).
#include <algorithm>
#include <future>
#include <map>
#include <memory>

#include "models/gpt_model.hpp"
#include "models/weights.hpp"
#include "tests/support/model_cases.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using test::Case, test::case_dirs, test::feature_case_dirs, test::load_case, test::tolerance, test::rel_error,
    test::for_each_case;

namespace {

// The cases a context runs whole models on: every fixture on this device's own kernels (and
// its other decode mat-vec), the feature cases through a GPU's and the fallback's.
std::vector<std::filesystem::path> case_dirs_for(vk::Context& ctx) {
  const bool stand_in = &ctx == &test::gpu_paths_context() || &ctx == &test::fallback_context();
  return stand_in ? feature_case_dirs() : case_dirs();
}

// The case's model with per-op timing on, or nullptr (the test is skipped) where the
// device has no timestamp queries.
std::unique_ptr<GptModel> profiled_model(vk::Context& ctx, const Case& c, uint32_t max_chunk) {
  if (!ctx.caps().timestamps) {
    BOOST_TEST_MESSAGE("skipped: the device has no timestamp queries");
    return nullptr;
  }
  auto model = std::make_unique<GptModel>(ctx, c.cfg, load_weights(ctx, c.cfg), max_chunk);
  model->set_profile(true);
  return model;
}

// Dispatches of `op` (summed over layers) in the model's last profiled call; 0 if none.
uint32_t op_dispatches(const GptModel& model, const std::string& op) {
  uint32_t count = 0;
  for (const auto& t : model.profile_summary()) {
    if (t.name == op) count = t.dispatches;
    BOOST_TEST(t.ms >= 0.0);
  }
  return count;
}

// The op of that name in the model's last profiled call (zeros if none).
OpTime op_time(const GptModel& model, const std::string& op) {
  for (const auto& t : model.profile_summary())
    if (t.name == op) return t;
  return OpTime{op, 0.0, 0};
}

// lavapipe compiles each pipeline at its first dispatch, one at a time on its device's queue
// thread, and most of a cold run is that. The GPU-path, fallback and other-mat-vec contexts
// are devices of their own, so the first test starts a thread for each that runs every case
// once on it (a prompt in the chunks the tests use, then a decode step; f16 caches too on
// the GPU paths), checking nothing (Boost.Test's assertions are single-threaded), while
// this thread checks the native device. A test calls ready(ctx) before using one of them,
// which waits for its thread and rethrows its errors.
class BackgroundWarmUp {
 public:
  void start() {
    if (!threads_.empty()) return;
    for (vk::Context* ctx : {&test::gpu_paths_context(), &test::fallback_context(), &test::other_matvec_context()})
      threads_.emplace(ctx, std::async(std::launch::async, run, ctx, ctx == &test::gpu_paths_context(),
                                       ctx == &test::fallback_context()));
  }
  void ready(vk::Context& ctx) {
    auto it = threads_.find(&ctx);
    if (it != threads_.end() && it->second.valid()) it->second.get();
  }
  void ready_all() {
    for (auto& [ctx, thread] : threads_) ready(*ctx);
  }

 private:
  static void run(vk::Context* ctx, bool gpu, bool fallback) {
    for (const auto& dir : case_dirs_for(*ctx)) {
      Case c = load_case(dir);
      for (bool kv_f16 : {false, true}) {
        if (kv_f16 && (!gpu || c.cfg.head_dim() % 8)) continue;
        c.cfg.kv_dtype = kv_f16 ? DType::F16 : DType::F32;
        GptModel model(*ctx, c.cfg, allocate_weights(*ctx, c.cfg), gpu && !kv_f16 ? 16 : fallback ? 32 : 20);
        const size_t n = std::min<size_t>(c.ids.size() - 1, 24);
        model.prefill(std::span(c.ids).first(n), 0, true);
        if (!fallback) model.decode_logits(c.ids[n], static_cast<uint32_t>(n));
      }
    }
  }
  std::map<vk::Context*, std::future<void>> threads_;
};
BackgroundWarmUp g_warm_up;

// Threads a run left unjoined (a test filtered out or failed) end before the contexts are
// released: global fixtures are torn down in reverse order, after ReleaseContextsAtEnd's.
struct JoinWarmUpAtEnd {
  void setup() {}
  void teardown() {
    try {
      g_warm_up.ready_all();
    } catch (const std::exception& e) {
      BOOST_ERROR("background warm-up: " << e.what());
    }
  }
};

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(JoinWarmUpAtEnd);

BOOST_FIXTURE_TEST_SUITE(models, test::NoValidationMessages)

// Six or more cases; the other devices' runs take f32 and f16 weights, pre- and post-LN, and
// three activations among them.
BOOST_AUTO_TEST_CASE(fixtures_exist) {
  BOOST_TEST(case_dirs().size() >= 6u);
  BOOST_TEST(feature_case_dirs().size() >= 5u);
}

// One prefill of the whole sequence matches PyTorch at every position.
BOOST_AUTO_TEST_CASE(prefill_matches_pytorch) {
  g_warm_up.start();
  auto& ctx = test::context();
  for_each_case([&](const Case& c) {
    BOOST_REQUIRE_EQUAL(c.logits.shape.size(), 2u);
    BOOST_REQUIRE_EQUAL(c.logits.shape[0], c.ids.size());
    BOOST_REQUIRE_EQUAL(c.logits.shape[1], c.cfg.vocab_size);
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg));
    auto logits = model.prefill(c.ids, 0, true);
    double err = rel_error(logits, c.logits, 0, c.ids.size(), c.cfg.vocab_size);
    BOOST_TEST_MESSAGE(c.name << ": max rel error " << err);
    BOOST_TEST(err <= tolerance(c.cfg));
  });
}

// Prefill of n tokens (in chunks smaller than n) then decode of the rest one token at a
// time gives the same logits as one prefill: the KV cache and the mat-vec path agree
// with the GEMM path.
BOOST_AUTO_TEST_CASE(chunked_prefill_then_decode_matches) {
  auto& ctx = test::context();
  for_each_case([&](const Case& c) {
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = c.ids.size() * 2 / 3;
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), /*max_chunk=*/24);
    auto head = model.prefill(std::span(c.ids).first(n), 0, true);
    BOOST_TEST(rel_error(head, c.logits, 0, n, V) <= tolerance(c.cfg));
    double worst = 0;
    for (size_t t = n; t < c.ids.size(); ++t) {
      auto step = model.decode_logits(c.ids[t], static_cast<uint32_t>(t));
      worst = std::max(worst, rel_error(step, c.logits, t, 1, V));
    }
    BOOST_TEST_MESSAGE(c.name << ": decode max rel error " << worst);
    BOOST_TEST(worst <= tolerance(c.cfg));
  });
}

// A step that needs only its last position's logits (GptModel::last_logits, and the prompt
// that `generate` samples after) runs its last layer past the KV cache for that position
// alone: its logits, and the decode steps after it (which read that layer's cache), match
// PyTorch, in one chunk or several, with an f16 KV cache too, on this device and through a
// GPU's kernel choices. (CPU devices do it for chunks that take the tiled attention path:
// 16 tokens or more.)
BOOST_AUTO_TEST_CASE(last_position_only_matches) {
  struct Run {
    uint32_t chunk;
    bool kv_f16;
  };
  for (vk::Context* ctx : {&test::context(), &test::gpu_paths_context()}) {
    g_warm_up.ready(*ctx);
    const uint64_t messages = ctx->validation_messages();
    for_each_case([&](Case c) {
      const uint32_t V = c.cfg.vocab_size;
      const size_t n = std::min<size_t>(c.ids.size() - 2, 40);
      // One chunk with an f32 cache, then two with an f16 one where the head dim allows
      // (f32 again elsewhere): each model is a new set of lavapipe compiles, so the two
      // choices are not crossed.
      for (Run run : {Run{48, false}, Run{20, c.cfg.head_dim() % 8 == 0}}) {
        c.cfg.kv_dtype = run.kv_f16 ? DType::F16 : DType::F32;
        GptModel model(*ctx, c.cfg, load_weights(*ctx, c.cfg), run.chunk);
        double worst = rel_error(model.last_logits(std::span(c.ids).first(n), 0), c.logits, n - 1, 1, V);
        for (size_t t = n; t < n + 2; ++t)
          worst = std::max(worst, rel_error(model.decode_logits(c.ids[t], static_cast<uint32_t>(t)), c.logits, t, 1, V));
        BOOST_TEST_MESSAGE(c.name << ": last position only, chunks of " << run.chunk << (run.kv_f16 ? ", f16 KV" : "")
                                  << " on " << ctx->info().name << ", max rel error " << worst);
        // f16 caches round keys and values to 2^-11 (f16_kv_cache_matches).
        BOOST_TEST(worst <= (run.kv_f16 && c.cfg.dtype == DType::F32 ? 5e-3 : tolerance(c.cfg)));
      }
    }, case_dirs_for(*ctx));
    BOOST_TEST(ctx->validation_messages() == messages, "validation layer reported: " << ctx->last_validation_message());
  }
}

// The serving path of `generate`: the model's pipelines are set compiling (GptModel::warm_up)
// on allocated but unwritten weights, the weights are written while that is in flight, and
// the prompt (in 24-token chunks) and the next steps still give PyTorch's answers: the
// greedy pick is PyTorch's argmax where its top two differ clearly, and the decode logits
// after it match. Validation (synchronization included) stays silent.
BOOST_AUTO_TEST_CASE(warm_up_before_weights_are_written) {
  auto& ctx = test::context();
  for_each_case([&](const Case& c) {
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = c.ids.size() * 2 / 3;
    WeightsFile file = WeightsFile::open(c.cfg);
    GptModel model(ctx, c.cfg, allocate_weights(ctx, c.cfg), /*max_chunk=*/24);
    model.set_sampling({0.0f, 0, 1.0f, 0});
    model.warm_up(static_cast<uint32_t>(n));
    file.load_into(model.weights());
    uint32_t token = model.prefill_and_sample(std::span(c.ids).first(n));
    std::vector<float> row(c.logits.data.begin() + (n - 1) * V, c.logits.data.begin() + n * V);
    std::vector<float> sorted = row;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] > 0.05f * std::max(1.0f, std::abs(sorted[0])))
      BOOST_TEST(token == static_cast<uint32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    auto step = model.decode_logits(c.ids[n], static_cast<uint32_t>(n));
    BOOST_TEST(rel_error(step, c.logits, n, 1, V) <= tolerance(c.cfg));
  });
}

// The fallback paths (no fp16, no subgroups, 16 KB shared memory, 64 MiB bindings) give
// the same answers on whole models (test::feature_case_dirs).
BOOST_AUTO_TEST_CASE(fallback_device_matches) {
  auto& ctx = test::fallback_context();
  g_warm_up.ready(ctx);
  for_each_case([&](const Case& c) {
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), 32);
    auto logits = model.prefill(c.ids, 0, true);
    BOOST_TEST(rel_error(logits, c.logits, 0, c.ids.size(), c.cfg.vocab_size) <= tolerance(c.cfg));
  }, case_dirs_for(ctx));
}

// The paths a discrete GPU takes (GPTVK_FORCE=gpu: the wide attention kernel, the 256-wide
// mat-vecs, the tiled GEMM, staging uploads) give PyTorch's answers on whole models: chunked
// prefill, then decode steps. On lavapipe these kernels are slow, so the cases of
// test::feature_case_dirs run with their first 24 positions prefilled and the next 8 decoded.
BOOST_AUTO_TEST_CASE(gpu_paths_match) {
  auto& ctx = test::gpu_paths_context();
  g_warm_up.ready(ctx);
  BOOST_REQUIRE(!ctx.cpu_kernels());
  BOOST_TEST(ctx.info().is_cpu() == test::context().info().is_cpu());  // the device stays what it is
  const uint64_t messages = ctx.validation_messages();
  for_each_case([&](const Case& c) {
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = std::min<size_t>(c.ids.size() - 1, 24), end = std::min<size_t>(c.ids.size(), n + 8);
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), /*max_chunk=*/16);
    auto head = model.prefill(std::span(c.ids).first(n), 0, true);
    BOOST_TEST(rel_error(head, c.logits, 0, n, V) <= tolerance(c.cfg));
    double worst = 0;
    for (size_t t = n; t < end; ++t)
      worst = std::max(worst, rel_error(model.decode_logits(c.ids[t], static_cast<uint32_t>(t)), c.logits, t, 1, V));
    BOOST_TEST_MESSAGE(c.name << ": gpu paths, decode max rel error " << worst);
    BOOST_TEST(worst <= tolerance(c.cfg));
  }, case_dirs_for(ctx));
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

// The matrix units in whole models, on emulated cooperative matrices
// (GPTVK_FORCE=gpu,coopmat_emu: the GPU paths, with the f16 cases' prompt products and, in
// chunks of ops::kCoopMatAttentionMinTokens or more, attention through them), so that
// devices without matrix units check how the plan uses them: a prefill then decode steps
// give PyTorch's answers. The kernels round their inputs to f16, which f16 weights'
// tolerance covers (2.2e-3 on lavapipe).
BOOST_AUTO_TEST_CASE(emulated_coopmat_prompts_match) {
  auto& ctx = test::coopmat_emu_context();
  if (ctx.caps().coopmat.api != vk::CoopMatApi::Emulated) {
    BOOST_TEST_MESSAGE("skipped: " << ctx.info().name << " has no f16 arithmetic or subgroups to emulate matrices with");
    return;
  }
  const uint64_t messages = ctx.validation_messages();
  int f16_cases = 0;
  for_each_case([&](const Case& c) {
    if (c.cfg.dtype != DType::F16) return;
    ++f16_cases;
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = c.ids.size() - 2, end = c.ids.size();
    BOOST_TEST_REQUIRE(n >= ops::kCoopMatAttentionMinTokens);
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), static_cast<uint32_t>(n));
    BOOST_TEST_REQUIRE(model.plan().coopmat_attention(static_cast<uint32_t>(n)));
    double worst = rel_error(model.prefill(std::span(c.ids).first(n), 0, true), c.logits, 0, n, V);
    for (size_t t = n; t < end; ++t)
      worst = std::max(worst, rel_error(model.decode_logits(c.ids[t], static_cast<uint32_t>(t)), c.logits, t, 1, V));
    BOOST_TEST_MESSAGE(c.name << ": emulated matrix units, max rel error " << worst);
    BOOST_TEST(worst <= tolerance(c.cfg));
  });
  BOOST_TEST(f16_cases >= 1);
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

// The same for Q8_0 weights (the first f32 fixture's, quantized), whose prompt products
// take the matrix units by dequantizing W to f16 as it is staged (bf16 is turned into f16
// the same way: tests/test_linear_coopmat.cpp): a prefill on emulated matrix units against
// the same weights through a GPU's FP32 tiled GEMM and attention kernels
// (test::gpu_paths_context). Only the f16 rounding of the products' inputs and weights, and
// of attention's, differs: 1.5e-3 of the largest logit on lavapipe, tolerance 5e-3.
BOOST_AUTO_TEST_CASE(emulated_coopmat_prompts_over_q8_0_match_the_tiled_gemm) {
  auto& emu = test::coopmat_emu_context();
  if (emu.caps().coopmat.api != vk::CoopMatApi::Emulated) {
    BOOST_TEST_MESSAGE("skipped: " << emu.info().name << " has no f16 arithmetic or subgroups to emulate matrices with");
    return;
  }
  auto& tiled = test::gpu_paths_context();
  const uint64_t messages = emu.validation_messages();
  bool ran = false;
  for_each_case([&](Case c) {
    if (ran || c.cfg.dtype != DType::F32 || c.cfg.emb_dim % 32) return;
    ran = true;
    const size_t n = c.ids.size() - 2;
    c.cfg.dtype = DType::Q8_0;
    GptModel on_units(emu, c.cfg, load_weights(emu, c.cfg), static_cast<uint32_t>(n));
    GptModel on_fp32(tiled, c.cfg, load_weights(tiled, c.cfg), static_cast<uint32_t>(n));
    BOOST_TEST_REQUIRE(on_units.plan().coopmat_attention(static_cast<uint32_t>(n)));
    const std::vector<float> want = on_fp32.prefill(std::span(c.ids).first(n), 0, true);
    const double err = test::max_rel_error(on_units.prefill(std::span(c.ids).first(n), 0, true), want);
    BOOST_TEST_MESSAGE(c.name << " in q8_0: emulated matrix units against the tiled GEMM, max rel error " << err);
    BOOST_TEST(err <= 5e-3);
  });
  BOOST_TEST(ran);
  BOOST_TEST(emu.validation_messages() == messages, "validation layer reported: " << emu.last_validation_message());
}

// weights.kv_dtype = "f16": the caches hold f16, and a chunked prefill (the CPU devices'
// tiled attention from 16 tokens) then decode steps still give PyTorch's answers, on this
// device and through a GPU's kernel choices. The caches' rounding (2^-11 relative) adds far
// less than f16 weights do: with f32 weights the logits stay within 5e-3.
BOOST_AUTO_TEST_CASE(f16_kv_cache_matches) {
  for (vk::Context* ctx : {&test::context(), &test::gpu_paths_context()}) {
    g_warm_up.ready(*ctx);
    const uint64_t messages = ctx->validation_messages();
    for_each_case([&](Case c) {
      if (c.cfg.head_dim() % 8) return;
      c.cfg.kv_dtype = DType::F16;
      const uint32_t V = c.cfg.vocab_size;
      const size_t n = c.ids.size() * 2 / 3;
      GptModel model(*ctx, c.cfg, load_weights(*ctx, c.cfg), /*max_chunk=*/20);
      double worst = rel_error(model.prefill(std::span(c.ids).first(n), 0, true), c.logits, 0, n, V);
      for (size_t t = n; t < c.ids.size(); ++t)
        worst = std::max(worst, rel_error(model.decode_logits(c.ids[t], static_cast<uint32_t>(t)), c.logits, t, 1, V));
      BOOST_TEST_MESSAGE(c.name << ": f16 KV cache on " << ctx->info().name << ", max rel error " << worst);
      BOOST_TEST(worst <= (c.cfg.dtype == DType::F32 ? 5e-3 : tolerance(c.cfg)));
    }, case_dirs_for(*ctx));
    BOOST_TEST(ctx->validation_messages() == messages, "validation layer reported: " << ctx->last_validation_message());
  }
}

// The CPU decode mat-vec this device does not choose by itself (row or column split,
// test::other_matvec_context) gives PyTorch's answers too: decode steps after a chunked
// prefill, and the greedy pick fused into the LM head.
BOOST_AUTO_TEST_CASE(other_decode_matvec_matches) {
  auto& ctx = test::other_matvec_context();
  g_warm_up.ready(ctx);
  BOOST_TEST(ctx.caps().column_split_matvec != test::context().caps().column_split_matvec);
  const uint64_t messages = ctx.validation_messages();
  for_each_case([&](const Case& c) {
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = c.ids.size() * 2 / 3;
    GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), /*max_chunk=*/24);
    model.set_sampling({0.0f, 0, 1.0f, 0});
    const uint32_t token = model.prefill_and_sample(std::span(c.ids).first(n));
    std::vector<float> row(c.logits.data.begin() + (n - 1) * V, c.logits.data.begin() + n * V);
    std::vector<float> sorted = row;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] > 0.05f * std::max(1.0f, std::abs(sorted[0])))
      BOOST_TEST(token == static_cast<uint32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    double worst = 0;
    for (size_t t = n; t < c.ids.size(); ++t)
      worst = std::max(worst, rel_error(model.decode_logits(c.ids[t], static_cast<uint32_t>(t)), c.logits, t, 1, V));
    BOOST_TEST_MESSAGE(c.name << ": other decode mat-vec, max rel error " << worst);
    BOOST_TEST(worst <= tolerance(c.cfg));
  });
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

// Logits of the positions from `first` on only (perplexity's windows), in chunks and within
// one: each such row is PyTorch's, and the LM head ran over fewer rows (first rounded down
// to an aligned row). Firsts: 0, a row inside the first chunk, one in a later chunk, the last.
BOOST_AUTO_TEST_CASE(logits_from_a_row_on_match) {
  Case c = load_case(case_dirs().front());
  const uint32_t V = c.cfg.vocab_size, n = std::min<uint32_t>(static_cast<uint32_t>(c.ids.size()), 30), chunk = 12;
  GptModel model(test::context(), c.cfg, load_weights(test::context(), c.cfg), chunk);
  model.set_profile(true);
  for (uint32_t first : {0u, 5u, 17u, n - 1}) {
    const auto logits = model.prefill_logits_from(std::span(c.ids).first(n), 0, first);
    BOOST_REQUIRE_EQUAL(logits.size(), size_t(n - first) * V);
    BOOST_TEST(rel_error(logits, c.logits, first, n - first, V) <= tolerance(c.cfg), "first " << first);
    // The profile covers the call's chunks: each chunk that holds wanted rows ran the LM head
    // over them and at most a few rows before (down to an aligned row), the others none.
    const uint64_t per_row = 2ull * V * c.cfg.emb_dim, chunks = (n + chunk - 1) / chunk;
    BOOST_TEST(op_time(model, "lm_head").flops >= (n - first) * per_row, "first " << first);
    BOOST_TEST(op_time(model, "lm_head").flops <= (n - first + 3 * chunks) * per_row, "first " << first);
  }
}

// `--profile` reports the graphs of the call it follows, each once: a one-token prompt right
// after a decode step (the same graph) is not counted twice, and a prompt in chunks counts
// every chunk's layers but only one LM head (the chunks before the last stop at the KV cache).
// Its rates: each product's dispatches carry the bytes of the weights they read and twice
// their multiply-adds, summed over the layers; ops that are not products carry none.
BOOST_AUTO_TEST_CASE(profile_covers_the_last_call_once) {
  Case c = load_case(case_dirs().front());
  const uint32_t chunk = 8, n = 20, layers = c.cfg.n_layers;
  auto profiled = profiled_model(test::context(), c, chunk);
  if (!profiled) return;
  GptModel& model = *profiled;
  model.set_sampling({0.0f, 0, 1.0f, 0});
  auto dispatches = [&](const std::string& op) { return op_dispatches(model, op); };
  const Matrix& qkv = model.shared_weights()->layers[0].qkv;
  const uint64_t qkv_bytes = uint64_t(qkv.rows) * qkv.row_bytes(), qkv_macs = uint64_t(qkv.rows) * qkv.cols;
  BOOST_REQUIRE(c.ids.size() >= n);
  model.prefill_and_sample(std::span(c.ids).first(n));
  BOOST_TEST(dispatches("embed") == 3u);  // chunks of 8, 8 and 4 tokens
  BOOST_TEST(dispatches("qkv") == 3u * layers);
  BOOST_TEST(dispatches("lm_head") == 1u);
  BOOST_TEST(op_time(model, "qkv").flops == 2 * n * qkv_macs * layers);
  BOOST_TEST(op_time(model, "qkv").weight_bytes == 3 * qkv_bytes * layers);  // W read once a chunk
  model.decode_next();
  BOOST_TEST(dispatches("qkv") == layers);
  BOOST_TEST(op_time(model, "qkv").flops == 2 * qkv_macs * layers);
  BOOST_TEST(op_time(model, "qkv").weight_bytes == qkv_bytes * layers);
  BOOST_TEST(op_time(model, "lm_head").flops == 2ull * c.cfg.vocab_size * c.cfg.emb_dim);
  BOOST_TEST(op_time(model, "attention").dispatches == layers);
  BOOST_TEST(op_time(model, "attention").weight_bytes == 0u);
  BOOST_TEST(op_time(model, "attention").flops == 0u);
  model.prefill_and_sample(std::span(c.ids).first(1));
  BOOST_TEST(dispatches("embed") == 1u);
  BOOST_TEST(dispatches("qkv") == layers);
  BOOST_TEST(dispatches("lm_head") == 1u);
}

// On GPUs a decode step folds every LayerNorm of a pre-LN model into the mat-vec after it
// (ops::NormBefore): its graph has no LayerNorm dispatch, while a prompt chunk keeps them
// (gpu_paths_match checks the answers of both).
BOOST_AUTO_TEST_CASE(gpu_decode_folds_its_layernorms) {
  Case c = load_case(case_dirs().front());
  BOOST_REQUIRE(c.cfg.norm_position == NormPosition::Pre);
  BOOST_REQUIRE(c.cfg.final_norm);
  const uint32_t chunk = 8, layers = c.cfg.n_layers;
  g_warm_up.ready(test::gpu_paths_context());
  auto profiled = profiled_model(test::gpu_paths_context(), c, chunk);
  if (!profiled) return;
  GptModel& model = *profiled;
  auto dispatches = [&](const std::string& op) { return op_dispatches(model, op); };
  BOOST_REQUIRE(c.ids.size() > chunk);
  model.prefill(std::span(c.ids).first(chunk), 0, true);
  BOOST_TEST(dispatches("ln1") == layers);
  BOOST_TEST(dispatches("ln2") == layers);
  BOOST_TEST(dispatches("ln_f") == 1u);
  model.decode_logits(c.ids[chunk], chunk);
  BOOST_TEST(dispatches("ln1") == 0u);
  BOOST_TEST(dispatches("ln2") == 0u);
  BOOST_TEST(dispatches("ln_f") == 0u);
  BOOST_TEST(dispatches("qkv") == layers);
  BOOST_TEST(dispatches("lm_head") == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
