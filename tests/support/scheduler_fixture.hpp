// The bundled model's slots, prompts and options for the scheduler's tests
// (test_scheduler, test_scheduler_scoring), and the check that a sequence's steps equal a
// lone Generator's.
#pragma once
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"
#include "runtime/scheduler.hpp"
#include "tests/support/vk_test.hpp"

namespace gptvk {
inline std::ostream& operator<<(std::ostream& os, FinishReason r) {
  return os << int(r) << " (" << finish_reason_name(r) << ")";
}
}  // namespace gptvk

namespace gptvk::test {

inline const std::filesystem::path kSchedulerConfig =
    std::filesystem::path(GPTVK_SOURCE_DIR) / "models/default/config.toml";

struct SchedulerFixture : NoValidationMessages {
  ModelConfig cfg = load_config(kSchedulerConfig.string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);

  std::vector<std::unique_ptr<GptModel>> slots(uint32_t n, uint32_t max_chunk = 256) {
    auto weights = std::make_shared<ModelWeights>(load_weights(context(), cfg));
    return make_slot_models(context(), cfg, std::move(weights), n, max_chunk);
  }
  GenerationOptions options(uint32_t i) {
    GenerationOptions o;
    o.sampling = {i % 3 == 0 ? 0.0f : 0.9f, i % 2 ? 40u : 0u, i % 4 == 1 ? 0.9f : 1.0f, 1000 + i};
    o.max_tokens = 10 + 3 * i;
    o.logprobs = i % 2 ? 3 : 0;
    if (i == 4) o.stop = {","};
    return o;
  }
  std::vector<uint32_t> prompt(uint32_t i) { return tok.encode("It was a fine morning " + std::to_string(i) + ", and"); }
  // prompt(from), prompt(from + 1), ... one after another, cut to n tokens.
  std::vector<uint32_t> joined_prompts(size_t n, uint32_t from = 0) {
    std::vector<uint32_t> p;
    for (uint32_t i = from; p.size() < n; ++i) {
      std::vector<uint32_t> more = prompt(i);
      p.insert(p.end(), more.begin(), more.end());
    }
    p.resize(n);
    return p;
  }
  // The steps `seq` gave equal those of a lone Generator over `lone` with the same prompt
  // and options: tokens, text, finish reason, log-probabilities.
  void expect_lone(GptModel& lone, const Sequence& seq, const std::vector<GenerationStep>& steps) {
    BOOST_TEST(seq.error().empty());
    Generator gen(lone, tok);
    gen.start(seq.prompt(), seq.options());
    std::vector<uint32_t> tokens;
    std::string text;
    for (const auto& s : steps) {
      if (s.token) tokens.push_back(*s.token);
      text += s.text;
    }
    while (!gen.finished()) gen.next();
    BOOST_TEST(tokens == gen.tokens());
    BOOST_TEST(text == gen.text());
    BOOST_TEST(seq.finish_reason() == gen.finish_reason());
    size_t k = 0;
    for (const auto& s : steps)
      if (s.logprob) BOOST_TEST(s.logprob->logprob == gen.logprobs().at(k++).logprob);
    BOOST_TEST(k == gen.logprobs().size());
  }
};

// Every step's text, token and logprob, until the end.
inline std::vector<GenerationStep> drain(Sequence& s) {
  std::vector<GenerationStep> steps;
  for (int i = 0; i < 6000 && !s.wait_steps(steps, std::chrono::milliseconds(50)); ++i) {
  }
  return steps;
}

}  // namespace gptvk::test
