// models/decode_batch on the bundled model: sequences of different prompt lengths, joining
// a running batch at different steps, each with its own sampling parameters and seed (greedy,
// top-k, top-p, penalties), decode together in one graph a step, and each one's tokens equal
// those of the same sequence decoding alone (GptModel::decode_next). With exact rows every
// step's logits are bit-identical too; with the B-row GEMMs they differ by summation order
// only, within the tolerance stated below.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/error.hpp"
#include "engine/ops/linear.hpp"
#include "models/config.hpp"
#include "models/decode_batch.hpp"
#include "models/gpt_model.hpp"
#include "models/weights.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

const fs::path kConfig = fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml";
// A GPU's kernels run on a small fixture model (f16 weights on the device, 311 tokens): on
// lavapipe a GPU's LM-head mat-vec over the bundled model's 50257 rows takes 0.1 s a step.
const fs::path kGpuConfig = fs::path(GPTVK_SOURCE_DIR) / "tests/fixtures/models/hf_gpt2_f16_device/config.toml";
constexpr uint32_t kSequences = 6, kTokens = 12;

struct Run {
  std::vector<uint32_t> tokens;             // the first (from prefill) and kTokens decoded
  std::vector<std::vector<float>> logits;   // the logits each decoded token was sampled from
};

struct Fixture : test::NoValidationMessages {
  ModelConfig cfg = load_config(kConfig.string());
  std::shared_ptr<ModelWeights> weights = std::make_shared<ModelWeights>(load_weights(test::context(), cfg));

  ops::SamplingParams sampling(uint32_t i) const {
    ops::SamplingParams p;
    p.temperature = i % 3 == 0 ? 0.0f : 0.8f + 0.1f * i;
    p.top_k = i % 2 ? 40 : 0;
    p.top_p = i == 4 ? 0.9f : 1.0f;
    p.seed = 77 + i;
    if (i == 5) p.repeat_penalty = 1.3f, p.presence_penalty = 0.5f;
    return p;
  }
  // Prompts of 1 to 31 tokens (prompt chunks of every kind: one token, the texel attention,
  // the tiled one from 16).
  std::vector<uint32_t> prompt(uint32_t i) const { return prompt(i, cfg.vocab_size); }
  static std::vector<uint32_t> prompt(uint32_t i, uint32_t vocab) {
    std::vector<uint32_t> p(1 + 6 * i);
    for (size_t t = 0; t < p.size(); ++t) p[t] = (1000 + 37 * i + 101 * t) % vocab;
    return p;
  }
  // A device's context, a model and its weights there: the suite's device, the same with a
  // GPU's kernels (gpu(), on kGpuConfig's model) or with the other CPU mat-vec.
  struct On {
    vk::Context& ctx;
    ModelConfig cfg;
    std::shared_ptr<ModelWeights> weights;
  };
  On native() { return {test::context(), cfg, weights}; }
  static On weights_on(vk::Context& ctx, const ModelConfig& c) {
    return {ctx, c, std::make_shared<ModelWeights>(load_weights(ctx, c))};
  }
  On gpu() { return weights_on(test::gpu_paths_context(), load_config(kGpuConfig.string())); }
  On quantized(DType dt) {
    ModelConfig c = cfg;
    c.dtype = dt;
    return weights_on(test::context(), c);
  }
  On other_matvec() { return weights_on(test::other_matvec_context(), cfg); }
  On shuffles_only(DType dt) {
    ModelConfig c = cfg;
    c.dtype = dt;
    return weights_on(test::shuffles_only_context(), c);
  }
  std::unique_ptr<GptModel> model() { return model(native()); }
  std::unique_ptr<GptModel> model(const On& on) { return std::make_unique<GptModel>(on.ctx, on.cfg, on.weights); }
  // A burst of prompts against each one alone (a_burst_of_prompts_... below): sequence i
  // has prompt `which[i]` of 7 (2 to 31 tokens; equal ones make twins, `twins` of them)
  // and its own sampling parameters and seed, over models on `on` with chunks of `chunk`
  // tokens, each prompt's chunks before its last run first. On a GPU's kernels the prompts
  // run one by one (twins still share).
  void burst_equals_lone(const On& on, bool controls, const std::vector<uint32_t>& which, uint32_t chunk = 256,
                         uint64_t twins = 0) {
    auto params = [&](uint32_t i) {
      ops::SamplingParams p = sampling(i % kSequences);
      if (!controls) p.repeat_penalty = 1.0f, p.presence_penalty = 0.0f;
      return p;
    };
    const std::vector<uint32_t> lens = {2, 3, 8, 15, 16, 17, 31};
    const uint32_t n = static_cast<uint32_t>(which.size()), tokens = 3;
    auto prompt_of = [&](uint32_t i) {
      std::vector<uint32_t> p(lens[which[i]]);
      for (size_t t = 0; t < p.size(); ++t) p[t] = (2000 + 53 * which[i] + 97 * t) % on.cfg.vocab_size;
      return p;
    };
    auto models = make_slot_models(on.ctx, on.cfg, on.weights, n, chunk);
    std::vector<GptModel*> rows;
    std::vector<std::vector<uint32_t>> prompts;
    std::vector<std::span<const uint32_t>> views;
    std::vector<uint32_t> prefilled;
    for (uint32_t i = 0; i < n; ++i) {
      models[i]->set_sampling(params(i));
      rows.push_back(models[i].get());
      prompts.push_back(prompt_of(i));
      const auto chunks = models[i]->prompt_chunks(prompts[i].size());
      for (size_t c = 0; c + 1 < chunks.size(); ++c)
        models[i]->prefill(std::span<const uint32_t>(prompts[i]).subspan(chunks[c].first, chunk), chunks[c].first, false);
      prefilled.push_back(chunks.back().first);
    }
    for (const auto& p : prompts) views.emplace_back(p);
    DecodeBatch batch(true);
    const std::vector<uint32_t> first = batch.sample_after_prefill(rows, views, prefilled);
    BOOST_REQUIRE_EQUAL(first.size(), size_t(n));
    // Every last chunk here has two or more tokens.
    BOOST_TEST(batch.burst_prompts() == (on.ctx.cpu_kernels() ? n : 0u));
    BOOST_TEST(batch.twin_prompts() == twins);
    std::vector<Run> runs(n);
    for (uint32_t i = 0; i < n; ++i) {
      runs[i].tokens.push_back(first[i]);
      runs[i].logits.push_back(models[i]->last_step_logits());
      BOOST_TEST(models[i]->position() == prompts[i].size());
    }
    for (uint32_t k = 0; k < tokens; ++k) {
      const std::vector<uint32_t> next = batch.decode_next(rows);
      for (uint32_t i = 0; i < n; ++i) {
        runs[i].tokens.push_back(next[i]);
        runs[i].logits.push_back(models[i]->last_step_logits());
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      BOOST_TEST_INFO("sequence " << i << ", " << prompts[i].size() << " prompt tokens");
      GptModel m(on.ctx, on.cfg, on.weights, chunk);
      m.set_sampling(params(i));
      std::vector<uint32_t> ref = {m.prefill_and_sample(prompts[i])};
      BOOST_TEST((runs[i].logits[0] == m.last_step_logits()));
      for (uint32_t k = 0; k < tokens; ++k) {
        ref.push_back(m.decode_next());
        BOOST_TEST((runs[i].logits[k + 1] == m.last_step_logits()), "token " << k + 1);
      }
      BOOST_TEST(runs[i].tokens == ref, boost::test_tools::per_element());
    }
  }

  Run alone(uint32_t i, uint32_t tokens = kTokens) { return alone(native(), i, tokens); }
  Run alone(const On& on, uint32_t i, uint32_t tokens) {
    auto m = model(on);
    m->set_sampling(sampling(i));
    Run r;
    r.tokens.push_back(m->prefill_and_sample(prompt(i, on.cfg.vocab_size)));
    for (uint32_t k = 0; k < tokens; ++k) {
      r.tokens.push_back(m->decode_next());
      r.logits.push_back(m->last_step_logits());
    }
    return r;
  }

  // Sequence i joins (its prefill) before batched step `join_every` i; the batch then steps
  // every sequence that has tokens left, one graph a step. `pooled`: the sequences' KV caches
  // are slots of one KvPool (make_slot_models), whose rows attend in one dispatch a layer
  // where the device can; else each has its own and attends in its own dispatch.
  std::vector<Run> batched(bool exact_rows, bool pooled) {
    return batched(native(), exact_rows, pooled, kSequences, kTokens, 2);
  }
  std::vector<Run> batched(const On& on, bool exact_rows, bool pooled, uint32_t n, uint32_t tokens,
                           uint32_t join_every) {
    std::vector<std::unique_ptr<GptModel>> models;
    if (pooled) models = make_slot_models(on.ctx, on.cfg, on.weights, n);
    else
      for (uint32_t i = 0; i < n; ++i) models.push_back(model(on));
    std::vector<Run> runs(n);
    DecodeBatch batch(exact_rows);
    for (uint32_t step = 0;; ++step) {
      std::vector<GptModel*> rows;
      std::vector<uint32_t> which;
      for (uint32_t i = 0; i < n; ++i) {
        if (step == join_every * i) {
          models[i]->set_sampling(sampling(i));
          runs[i].tokens.push_back(models[i]->prefill_and_sample(prompt(i, on.cfg.vocab_size)));
        }
        if (step >= join_every * i && runs[i].logits.size() < tokens)
          rows.push_back(models[i].get()), which.push_back(i);
      }
      if (rows.empty() && step > join_every * n) break;
      if (rows.empty()) continue;
      std::vector<uint32_t> next = batch.decode_next(rows);
      BOOST_REQUIRE_EQUAL(next.size(), rows.size());
      for (size_t b = 0; b < rows.size(); ++b) {
        runs[which[b]].tokens.push_back(next[b]);
        runs[which[b]].logits.push_back(rows[b]->last_step_logits());
      }
    }
    return runs;
  }

  // n sequences, pooled, `tokens` steps with exact rows on `on`, joining as batched() says:
  // each one's tokens and every step's logits bit for bit those of the sequence decoding
  // alone there.
  void check_exact_rows(const On& on, uint32_t n, uint32_t tokens, uint32_t join_every) {
    const std::vector<Run> runs = batched(on, true, true, n, tokens, join_every);
    for (uint32_t i = 0; i < n; ++i) {
      BOOST_TEST_INFO("sequence " << i);
      const Run ref = alone(on, i, tokens);
      BOOST_TEST(runs[i].tokens == ref.tokens, boost::test_tools::per_element());
      BOOST_REQUIRE_EQUAL(runs[i].logits.size(), ref.logits.size());
      for (size_t k = 0; k < ref.logits.size(); ++k) BOOST_TEST((runs[i].logits[k] == ref.logits[k]), "token " << k);
    }
  }
};

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(decode_batch, Fixture)

BOOST_AUTO_TEST_CASE(exact_rows_give_each_sequence_its_lone_tokens_and_logits_bit_for_bit) {
  std::vector<Run> refs;
  for (uint32_t i = 0; i < kSequences; ++i) refs.push_back(alone(i));
  for (bool pooled : {false, true}) {
  const std::vector<Run> runs = batched(true, pooled);
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i << (pooled ? ", KV pool" : ", own KV caches"));
    const Run& ref = refs[i];
    BOOST_TEST(runs[i].tokens == ref.tokens, boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(runs[i].logits.size(), ref.logits.size());
    for (size_t k = 0; k < ref.logits.size(); ++k) {
      BOOST_TEST_INFO("decoded token " << k);
      BOOST_TEST((runs[i].logits[k] == ref.logits[k]));
    }
  }
  }
}

// The same with a GPU's kernels (GPTVK_FORCE=gpu's context, whatever the device): batched
// steps with exact rows run the one-token mat-vecs over every row (up to 8 a workgroup),
// their LayerNorms folded in as the one-token step folds them. kGpuConfig's model; five
// sequences joining at once, pooled, three steps of five rows: a workgroup of 4 and one of 1.
BOOST_AUTO_TEST_CASE(exact_rows_through_a_gpus_kernels_are_bit_identical_too) {
  check_exact_rows(gpu(), 5, 3, 0);
}

// The same with the CPU decode mat-vec this host does not pick by itself (rows, or lanes
// splitting the columns: test::other_matvec_context), so that both batched forms (the GEMMs
// in the row kernel's order, the column-split kernel over several rows) run on any host.
// Six sequences joining one a step, pooled, five steps each: batches of 1 to 5 rows.
BOOST_AUTO_TEST_CASE(exact_rows_with_the_other_cpu_matvec_are_bit_identical_too,
                     *test::device_has([](vk::Context& c) { return c.cpu_kernels() && ops::row_matvec_supported(c); },
                                       "has no CPU row mat-vecs")) {
  check_exact_rows(other_matvec(), 6, 5, 1);
}

// The same with the bundled model's weights in Q8_0 blocks on the device: the batched steps'
// products (the CPU GEMMs over 2 to 6 rows, or the column-split kernel) sum each block as the
// one-token mat-vec does. Six sequences joining one a step, four steps each.
BOOST_AUTO_TEST_CASE(exact_rows_over_q8_0_weights_are_bit_identical_too) {
  check_exact_rows(quantized(DType::Q8_0), 6, 4, 1);
}

// Q8_0 blocks again on a device with subgroup shuffles but no subgroup arithmetic, where
// the CPU's broadcast GEMM cannot run: the one-token row mat-vec over every row.
BOOST_AUTO_TEST_CASE(exact_rows_over_q8_0_weights_without_subgroup_arithmetic,
                     *test::device_has([](vk::Context& c) { return c.cpu_kernels() && ops::row_matvec_supported(c); },
                                       "has no CPU row mat-vecs")) {
  check_exact_rows(shuffles_only(DType::Q8_0), 6, 4, 1);
}

// Sixteen rows in every step: on lavapipe they fill the CPU GEMM's wide tile (16 tokens a
// workgroup), which a batch of 6 never takes; its sums keep the one-token order too.
BOOST_AUTO_TEST_CASE(sixteen_rows_a_step_are_bit_identical_too) {
  constexpr uint32_t n = 16, tokens = 3;
  auto models = make_slot_models(test::context(), cfg, weights, n);
  std::vector<GptModel*> rows;
  std::vector<Run> runs(n);
  for (uint32_t i = 0; i < n; ++i) {
    models[i]->set_sampling(sampling(i));
    runs[i].tokens.push_back(models[i]->prefill_and_sample(prompt(i)));
    rows.push_back(models[i].get());
  }
  DecodeBatch batch(true);
  for (uint32_t k = 0; k < tokens; ++k) {
    const std::vector<uint32_t> next = batch.decode_next(rows);
    BOOST_REQUIRE_EQUAL(next.size(), size_t(n));
    for (uint32_t i = 0; i < n; ++i) {
      runs[i].tokens.push_back(next[i]);
      runs[i].logits.push_back(models[i]->last_step_logits());
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    const Run ref = alone(i, tokens);
    BOOST_TEST(runs[i].tokens == ref.tokens, boost::test_tools::per_element());
    for (size_t k = 0; k < tokens; ++k) BOOST_TEST((runs[i].logits[k] == ref.logits[k]));
  }
}

// Without exact rows the products are the prompt's GEMMs and the LayerNorms their own
// kernel's, which sum in other orders than the one-token step. On CPU devices: the same
// tokens (greedy and seeded), logits within 1e-4 of the largest logit's magnitude
// (measured 1.7e-6: f32 sums of f16 weights over 128-512 inputs). On GPUs, whose GEMM may
// round x to f16 (the cooperative-matrix kernel), logits within 2e-2 while a sequence's
// tokens agree; a token may differ at a near-tie, after which its logits are not compared.
BOOST_AUTO_TEST_CASE(gemm_rows_give_each_sequence_its_lone_tokens) {
  const bool cpu = test::context().info().is_cpu();
  const std::vector<Run> runs = batched(false, true);
  float worst = 0;
  uint32_t diverged = 0;
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    const Run ref = alone(i);
    if (cpu) BOOST_TEST(runs[i].tokens == ref.tokens, boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(runs[i].logits.size(), ref.logits.size());
    // logits[k] were sampled after tokens[0..k]: compared while those agree.
    for (size_t k = 0; k < ref.logits.size() && runs[i].tokens[k] == ref.tokens[k]; ++k) {
      float diff = 0;
      for (size_t v = 0; v < ref.logits[k].size(); ++v)
        diff = std::max(diff, std::fabs(runs[i].logits[k][v] - ref.logits[k][v]));
      worst = std::max(worst, diff / max_abs(ref.logits[k]));
    }
    diverged += runs[i].tokens != ref.tokens;
  }
  BOOST_TEST_MESSAGE("largest logit difference / largest logit: " << worst << "; sequences whose tokens differ: "
                                                                  << diverged);
  BOOST_TEST(worst <= (cpu ? 1e-4f : 2e-2f));
}

// A burst of prompts (DecodeBatch::sample_after_prefill): every prompt's chunk in one graph,
// each sequence's first token and the logits it came from bit-identical to its own prefill,
// and its KV cache too (the tokens decoded after it, batched, equal the lone sequence's).
// Prompts of 2 to 31 tokens: the texel attention below 16 tokens, the tiled passes and the
// last row alone in the last layer from 16. With a row that uses the sampling controls
// (penalties) every row has a sampler of its own; without, one dispatch samples them all.
BOOST_AUTO_TEST_CASE(a_burst_of_prompts_gives_each_its_lone_first_token_and_logits) {
  if (!test::context().cpu_kernels()) {
    BOOST_TEST_MESSAGE("a GPU's kernels: prompts run one by one with exact rows; nothing to compare");
    return;
  }
  for (bool controls : {true, false}) {
    BOOST_TEST_CONTEXT((controls ? "a row with penalties" : "no sampling controls")) {
      burst_equals_lone(native(), controls, {0, 1, 2, 3, 4, 5, 6});
    }
  }
}

// Twins: sequences whose prompts equal an earlier one's in the burst (OpenAI's n choices,
// clients sending one prompt) run no rows; their keys and values are copied and they sample
// from its logits, with their own parameters and seeds. Each still gets its lone
// first token and logits, and its later steps (over the copied keys and values) too. With
// chunks of 24 tokens the 31-token prompt's first chunk ran in each slot before the burst.
// On a GPU's kernels, where prompts run one by one, twins copy from the one that ran.
// (A GPU's twins each take their own sampler whatever the controls: one setting is enough.)
BOOST_AUTO_TEST_CASE(twins_get_their_lone_tokens_from_one_run_of_their_prompt) {
  for (bool controls : {true, false})
    BOOST_TEST_CONTEXT((controls ? "a row with penalties" : "no sampling controls")) {
      burst_equals_lone(native(), controls, {3, 1, 3, 6, 3, 1, 0}, 256, 3);
    }
  BOOST_TEST_CONTEXT("an earlier chunk") { burst_equals_lone(native(), false, {6, 6, 2, 6}, 24, 2); }
  const On gpu = this->gpu();
  BOOST_TEST_CONTEXT("a GPU's kernels") { burst_equals_lone(gpu, true, {3, 1, 3, 6, 3, 1, 0}, 256, 3); }
  BOOST_TEST_CONTEXT("a GPU's kernels, an earlier chunk") { burst_equals_lone(gpu, false, {6, 6, 2, 6}, 24, 2); }
}

// A prompt cache's exact hits (DecodeBatch::sample_kept): prompts that ran in a burst keep
// their first-token logits (keep_first_logits); the same prompts, drawn again with other
// seeds from those logits, over the keys and values copied to other slots
// (GptModel::copy_kept_prompt) or kept in their own, run no rows and give each its lone
// first token and logits, and its later steps. Equal prompts draw from one copy. With
// chunks of 24 tokens the 31-token prompt's first chunk is reused, not run.
BOOST_AUTO_TEST_CASE(kept_logits_give_a_repeated_prompt_its_lone_first_token) {
  const std::vector<uint32_t> lens = {2, 9, 16, 31};
  const uint32_t chunk = 24, n = static_cast<uint32_t>(lens.size()), steps = 3;
  auto prompt_of = [&](uint32_t i) {
    std::vector<uint32_t> p(lens[i % n]);
    for (size_t t = 0; t < p.size(); ++t) p[t] = (3000 + 41 * (i % n) + 89 * t) % cfg.vocab_size;
    return p;
  };
  auto params = [&](uint32_t i) {
    ops::SamplingParams p = sampling(i % 5);  // no sampling controls
    p.seed = 500 + i;
    return p;
  };
  // Slots 0..n-1 run prompts 0..n-1; then slots 0..2n-1 draw prompts 0..n-1, 0..n-1 again.
  auto models = make_slot_models(test::context(), cfg, weights, 2 * n, chunk);
  DecodeBatch batch(true);
  std::vector<GptModel*> first_rows;
  std::vector<std::vector<uint32_t>> prompts;
  for (uint32_t i = 0; i < 2 * n; ++i) prompts.push_back(prompt_of(i));
  std::vector<std::span<const uint32_t>> views(prompts.begin(), prompts.end());
  std::vector<uint32_t> prefilled;
  for (uint32_t i = 0; i < 2 * n; ++i) prefilled.push_back(models[i]->prompt_chunks(prompts[i].size()).back().first);
  for (uint32_t i = 0; i < n; ++i) {
    models[i]->set_sampling(params(100 + i));
    if (prefilled[i]) models[i]->prefill(std::span<const uint32_t>(prompts[i]).first(prefilled[i]), 0, false);
    first_rows.push_back(models[i].get());
  }
  batch.sample_after_prefill(first_rows, std::span(views).first(n), std::span(prefilled).first(n));
  batch.keep_first_logits(first_rows);
  for (uint32_t i = n; i < 2 * n; ++i) models[i]->copy_kept_prompt(*models[i - n], static_cast<uint32_t>(prompts[i].size()));
  std::vector<GptModel*> rows;
  for (uint32_t i = 0; i < 2 * n; ++i) {
    GptModel& m = *models[i];
    if (prefilled[i]) m.reuse_prompt_prefix(prefilled[i]);  // as Generator::begin does
    m.set_sampling(params(i));
    rows.push_back(&m);
  }
  BOOST_REQUIRE(DecodeBatch::can_sample_kept(rows));
  std::vector<Run> runs(2 * n);
  const std::vector<uint32_t> first = batch.sample_kept(rows, views, prefilled);
  for (uint32_t i = 0; i < 2 * n; ++i) {
    BOOST_TEST(models[i]->position() == prompts[i].size());
    runs[i].tokens.push_back(first[i]);
    runs[i].logits.push_back(models[i]->last_step_logits());
  }
  for (uint32_t k = 0; k < steps; ++k) {
    const std::vector<uint32_t> next = batch.decode_next(rows);
    for (uint32_t i = 0; i < 2 * n; ++i) runs[i].tokens.push_back(next[i]);
  }
  BOOST_TEST(batch.burst_prompts() == (test::context().cpu_kernels() ? n : 0u));  // the first round only
  for (uint32_t i = 0; i < 2 * n; ++i) {
    BOOST_TEST_INFO("sequence " << i << ", " << prompts[i].size() << " prompt tokens");
    GptModel m(test::context(), cfg, weights, chunk);
    m.set_sampling(params(i));
    std::vector<uint32_t> ref = {m.prefill_and_sample(prompts[i])};
    BOOST_TEST((runs[i].logits[0] == m.last_step_logits()));
    for (uint32_t k = 0; k < steps; ++k) ref.push_back(m.decode_next());
    BOOST_TEST(runs[i].tokens == ref, boost::test_tools::per_element());
  }
  models[0]->set_sampling(sampling(5));  // penalties: the one sampler dispatch has no controls
  BOOST_TEST(!DecodeBatch::can_sample_kept(rows));
}

BOOST_AUTO_TEST_CASE(a_full_context_or_a_repeated_sequence_is_refused) {
  auto a = model();
  a->set_sampling(sampling(0));
  a->prefill_and_sample(prompt(0));
  DecodeBatch batch;
  std::vector<GptModel*> twice = {a.get(), a.get()};
  BOOST_CHECK_THROW(batch.decode_next(twice), std::invalid_argument);
  auto full = model();
  full->set_sampling(sampling(0));
  std::vector<uint32_t> long_prompt(cfg.context_length - 1, 11);
  full->prefill_and_sample(long_prompt);
  std::vector<GptModel*> rows = {a.get(), full.get()};
  BOOST_CHECK_NO_THROW(batch.decode_next(rows));  // the last position fits
  BOOST_CHECK_THROW(batch.decode_next(rows), InputError);
}

BOOST_AUTO_TEST_SUITE_END()

// emb_dim 66 (3 heads of 22): row b of a batch's activations starts at 264 b bytes, for
// odd b not a multiple of 16 (lavapipe's binding alignment, and most GPUs'), and head_dim 22
// keeps attention off the one-dispatch row table, so every row's embedding and attention go
// to rows that no view could start at. Random weights; pooled and own KV caches, exact rows
// and GEMMs, the device's kernels and a GPU's: each sequence's tokens are its lone tokens.
BOOST_FIXTURE_TEST_CASE(rows_that_are_not_whole_vec4s_decode_as_each_sequence_alone, test::NoValidationMessages) {
  ModelConfig c;
  c.name = "emb66";
  c.vocab_size = 257, c.context_length = 32, c.emb_dim = 66, c.n_heads = 3, c.n_layers = 2, c.ffn_dim = 264;
  constexpr uint32_t n = 3, tokens = 4;
  auto prompt = [](uint32_t i) { return std::vector<uint32_t>{10 + i, 200 - 7 * i, 33 * i + 1}; };
  auto params = [](uint32_t i) {
    ops::SamplingParams p;
    p.temperature = i == 0 ? 0.0f : 0.9f, p.seed = 3 + i;
    return p;
  };
  for (const auto& [which, on] : test::native_and_gpu_contexts()) {
    vk::Context& ctx = *on;
    auto w = std::make_shared<ModelWeights>(random_weights(ctx, c, 5));
    // Each sequence alone, once per device: the batches below must all give these tokens.
    std::vector<std::vector<uint32_t>> lone(n);
    for (uint32_t i = 0; i < n; ++i) {
      GptModel alone(ctx, c, w);
      alone.set_sampling(params(i));
      lone[i] = {alone.prefill_and_sample(prompt(i))};
      for (uint32_t k = 0; k < tokens; ++k) lone[i].push_back(alone.decode_next());
    }
    for (bool exact : {true, false})
      for (bool pooled : {true, false}) {
        std::vector<std::unique_ptr<GptModel>> models;
        if (pooled) models = make_slot_models(ctx, c, w, n);
        else
          for (uint32_t i = 0; i < n; ++i) models.push_back(std::make_unique<GptModel>(ctx, c, w));
        std::vector<std::vector<uint32_t>> got(n);
        std::vector<GptModel*> rows;
        for (uint32_t i = 0; i < n; ++i) {
          models[i]->set_sampling(params(i));
          got[i].push_back(models[i]->prefill_and_sample(prompt(i)));
          rows.push_back(models[i].get());
        }
        DecodeBatch batch(exact);
        for (uint32_t k = 0; k < tokens; ++k) {
          const std::vector<uint32_t> next = batch.decode_next(rows);
          for (uint32_t i = 0; i < n; ++i) got[i].push_back(next[i]);
        }
        for (uint32_t i = 0; i < n; ++i) {
          BOOST_TEST_INFO(which << (exact ? ", exact rows" : ", GEMM rows")
                                << (pooled ? ", KV pool" : ", own KV caches") << ", sequence " << i);
          BOOST_TEST(got[i] == lone[i], boost::test_tools::per_element());
        }
      }
  }
}

// `serve` checks that --parallel slots fit beside the weights by slot_device_bytes, which
// must neither fall short of what a slot allocates (it left out CPU devices' attention
// scores, 12 MiB a slot of GPT-2 small, and the sampler's state) nor stand far above it.
// Each slot runs a prompt with every position's logits and one with a logit bias, as a
// server's may; the kept first-token logits are the part of the estimate left unused.
BOOST_AUTO_TEST_CASE(slot_device_bytes_bounds_what_slots_allocate) {
  for (auto [which, ctx] : test::native_and_gpu_contexts()) {
    const ModelConfig c = load_config((which == "native" ? kConfig : kGpuConfig).string());
    auto w = std::make_shared<ModelWeights>(load_weights(*ctx, c));
    constexpr uint32_t kChunk = 64, kSlots = 2;
    const uint64_t before = ctx->allocated_bytes();
    {
      auto slots = make_slot_models(*ctx, c, w, kSlots, kChunk);
      ops::SamplingParams biased;
      biased.logit_bias = {{5, 1.0f}};
      std::vector<GptModel*> rows;
      for (auto& m : slots) {
        m->prefill(Fixture::prompt(0, c.vocab_size), 0, true);
        m->set_sampling(biased);
        m->prefill_and_sample(Fixture::prompt(1, c.vocab_size));
        rows.push_back(m.get());
      }
      DecodeBatch batch(true);
      batch.decode_next(rows);  // the controls' own sampler
      for (auto& m : slots) m->set_sampling({});
      batch.decode_next(rows);  // the batch's sampler rows
      const double used = double(ctx->allocated_bytes() - before);
      const double estimate = double(kSlots) * double(slot_device_bytes(*ctx, c, kChunk)) +
                              double(DecodeBatch::device_bytes(*ctx, c, kSlots, kChunk));
      BOOST_TEST_INFO(which << ": " << used << " bytes allocated, estimate " << estimate);
      BOOST_TEST(used <= estimate);
      // (The GPU paths' fixture model is smaller than the rounding the estimate allows for.)
      if (which == "native") BOOST_TEST(used >= 0.8 * estimate);
    }
    BOOST_TEST(ctx->allocated_bytes() == before);
  }
}
