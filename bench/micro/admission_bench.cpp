// Where a server's time to first token goes on this device: the bundled model with 16 slots
// sharing its weights (as `gpt-vk serve --parallel 16`), timing each part of admitting a
// request and of the batched step beside it:
//   prefill+sample, graph cached    the same sampling parameters as the slot's last request
//   prefill+sample after set_sampling   new parameters (a new request)
//   batched step B=16, cached / new composition (a sequence left and another joined)
//   a burst of first tokens: one prompt, 16 equal ones (twins), 16 distinct ones
//   16 exact hits of the prompt cache: keys, values and kept logits copied, then one draw
// Build: ninja -C build micro_admission; run: build/bench/micro/micro_admission
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/vk/context.hpp"
#include "models/config.hpp"
#include "models/decode_batch.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"

using namespace gptvk;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f(i);
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int main() {
  vk::Context ctx;
  ModelConfig cfg = load_config(GPTVK_SOURCE_DIR "/models/default/config.toml");
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  const uint32_t S = 16;
  std::vector<std::unique_ptr<GptModel>> slots =
      make_slot_models(ctx, cfg, std::make_shared<ModelWeights>(load_weights(ctx, cfg)), S);
  const std::vector<uint32_t> prompt =
      tok.encode("It is a truth universally acknowledged, that a single man in possession");
  ops::SamplingParams p{0.8f, 0, 1.0f, 1};
  for (auto& m : slots) m->set_sampling(p), m->prefill_and_sample(prompt);  // pipelines compiled
  std::printf("prompt %zu tokens, %u slots\n", prompt.size(), S);
  std::printf("prefill+sample, graph cached:       %.2f ms\n",
              median_ms(16, [&](int i) { slots[i]->prefill_and_sample(prompt); }));
  std::printf("prefill+sample after set_sampling:  %.2f ms\n", median_ms(16, [&](int i) {
                p.seed = 100 + i;
                slots[i]->set_sampling(p);
                slots[i]->prefill_and_sample(prompt);
              }));
  DecodeBatch batch;
  std::vector<GptModel*> rows;
  for (auto& m : slots) rows.push_back(m.get());
  batch.decode_next(rows);
  std::printf("batched step B=16, cached graph:    %.2f ms\n", median_ms(8, [&](int) { batch.decode_next(rows); }));
  std::printf("batched step B=16, new composition: %.2f ms\n", median_ms(8, [&](int i) {
                std::swap(rows[i % S], rows[(i + 5) % S]);
                batch.decode_next(rows);
              }));
  std::printf("one-token step B=1:                 %.2f ms\n", median_ms(8, [&](int) { slots[0]->decode_next(); }));
  // Bursts of first tokens (DecodeBatch::sample_after_prefill): one prompt, 16 equal ones
  // (one runs, 15 twins copy its keys, values and logits), 16 distinct ones.
  auto burst = [&](size_t n, bool equal) {
    std::vector<std::vector<uint32_t>> prompts;
    for (size_t b = 0; b < n; ++b) prompts.push_back(equal ? prompt : tok.encode("Chapter " + std::to_string(b) + ". It is a truth"));
    std::vector<std::span<const uint32_t>> views(prompts.begin(), prompts.end());
    const std::vector<uint32_t> prefilled(n, 0);
    return median_ms(8, [&](int) { batch.sample_after_prefill(std::span(rows).first(n), views, prefilled); });
  };
  std::printf("burst of 1 prompt:                  %.2f ms\n", burst(1, true));
  std::printf("burst of 16 equal prompts (twins):  %.2f ms\n", burst(S, true));
  std::printf("burst of 16 distinct prompts:       %.2f ms\n", burst(S, false));
  // Exact hits of the prompt cache: 16 sequences with the prompt slot 0 ran and kept
  // (DecodeBatch::keep_first_logits), each slot's keys, values and logits copied from it
  // (GptModel::copy_kept_prompt, one submission each, as the scheduler's admission does),
  // then one draw for all (DecodeBatch::sample_kept).
  batch.sample_after_prefill(std::span(rows).first(1), std::vector<std::span<const uint32_t>>{prompt},
                             std::vector<uint32_t>{0});
  batch.keep_first_logits(std::span(rows).first(1));
  const std::vector<std::span<const uint32_t>> same(S, prompt);
  const std::vector<uint32_t> none(S, 0);
  const auto n = static_cast<uint32_t>(prompt.size());
  std::printf("16 exact hits, copies:              %.2f ms\n",
              median_ms(8, [&](int) { for (uint32_t b = 1; b < S; ++b) rows[b]->copy_kept_prompt(*rows[0], n); }));
  std::printf("16 exact hits, one draw:            %.2f ms\n",
              median_ms(8, [&](int) { batch.sample_kept(rows, same, none); }));
}
