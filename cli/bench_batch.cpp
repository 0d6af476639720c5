#include "cli/bench_batch.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <span>

#include "cli/profile_table.hpp"
#include "models/decode_batch.hpp"

namespace gptvk::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// One repeat at batch size B over models[0..B): every prompt prefilled (and its first token
// sampled), then gen_tokens decode steps of all B sequences.
void run_once(std::vector<GptModel*> rows, const std::vector<std::vector<uint32_t>>& prompts, uint32_t gen_tokens,
              DecodeBatch& batch, BenchRates* out) {
  const auto t0 = Clock::now();
  // Every prompt prefilled and its first token sampled, in bursts as a server admits them.
  std::vector<std::span<const uint32_t>> views(prompts.begin(), prompts.begin() + rows.size());
  batch.sample_after_prefill(rows, views, std::vector<uint32_t>(rows.size(), 0));
  const auto t1 = Clock::now();
  for (uint32_t i = 0; i < gen_tokens; ++i) {
    if (rows.size() == 1) rows[0]->decode_next();  // B = 1: the one-sequence step, as plain bench
    else batch.decode_next(rows);
  }
  const auto t2 = Clock::now();
  if (!out) return;
  out->prefill.push_back(double(prompts[0].size()) * rows.size() / seconds(t0, t1));
  if (gen_tokens) out->decode.push_back(double(gen_tokens) * rows.size() / seconds(t1, t2));
}

}  // namespace

std::vector<BenchRates> run_batch_bench(ModelSession& s, const BatchBenchFlags& f, const BenchSetup& setup) {
  const ModelConfig& cfg = s.cfg;
  const uint32_t most = *std::max_element(f.batches.begin(), f.batches.end());
  // Models over the session's weights whose KV caches are the slots of one pool, as a
  // server's are (sequence 0 alone is the one-sequence step, as plain bench).
  std::vector<std::unique_ptr<GptModel>> slots =
      make_slot_models(*s.ctx, cfg, s.model->shared_weights(), most, s.model->max_chunk());
  std::vector<GptModel*> models;
  for (auto& m : slots) models.push_back(m.get());
  std::mt19937 rng(42);
  std::vector<std::vector<uint32_t>> prompts(most, std::vector<uint32_t>(f.prompt_tokens));
  for (auto& p : prompts)
    for (auto& t : p) t = rng() % cfg.vocab_size;
  for (GptModel* m : models) m->set_sampling({0.0f, 0, 1.0f, 0});
  DecodeBatch batch(f.exact_rows);
  std::vector<BenchRates> rates(f.batches.size());
  for (size_t i = 0; i < f.batches.size(); ++i) rates[i].batch = f.batches[i];
  models[0]->set_profile(f.profile);
  for (uint32_t r = 0; r <= f.repeats; ++r)  // repeat 0 warms up; batch sizes alternate within a repeat
    for (size_t i = 0; i < f.batches.size(); ++i) {
      std::vector<GptModel*> rows(models.begin(), models.begin() + f.batches[i]);
      run_once(rows, prompts, f.gen_tokens, batch, r ? &rates[i] : nullptr);
    }
  print_bench_lines(setup, rates, true);
  if (f.profile)  // the last graph that ran: a decode step, or with --gen-tokens 0 the last prompts' burst
    print_profile_table((f.gen_tokens ? "decode step of batch " : "prompts of batch ") + std::to_string(f.batches.back()),
                        models[0]->profile_summary());
  return rates;
}

}  // namespace gptvk::cli
