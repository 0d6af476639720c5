// runtime/scheduler scoring prompts (OpenAI's echo with logprobs) on the bundled model: the
// scores run a chunk a round like any prompt's, the generation after them runs only the
// prompt's last chunk again, the choices of one prompt score it once, a sequence cancelled
// while scored leaves its slot, one with nothing to run leaves the slot's kept prompt;
// scores, tokens and log-probabilities equal a lone model's.
#include <boost/test/unit_test.hpp>

#include <span>
#include <thread>

#include "tests/support/scheduler_fixture.hpp"

using namespace gptvk;
using test::drain;

namespace {

struct ScoringFixture : test::SchedulerFixture {
  // Greedy options that score the prompt with k alternatives a token and generate nothing.
  GenerationOptions scoring_only(uint32_t k) {
    GenerationOptions o = options(0);
    o.max_tokens = 0;
    o.logprobs = k;
    return o;
  }
  // seq's prompt scores equal those of `lone`'s logits for every row of the whole prompt
  // (the last row's aside), log-softmaxed on the host, bit for bit.
  void expect_scores(GptModel& lone, const Sequence& seq) {
    const std::vector<uint32_t>& p = seq.prompt();
    const uint64_t V = cfg.vocab_size;
    const std::vector<float> logits = lone.prefill(p, 0, true);
    const std::vector<TokenLogprob>& got = seq.prompt_logprobs();
    BOOST_REQUIRE_EQUAL(got.size(), p.size() - 1);
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      BOOST_TEST_INFO("prompt token " << i + 1);
      const TokenLogprob want =
          log_softmax_top(std::span<const float>(logits).subspan(i * V, V), p[i + 1], seq.options().logprobs);
      BOOST_TEST(got[i].token == want.token);
      BOOST_TEST(got[i].logprob == want.logprob);
      BOOST_TEST((got[i].top == want.top));
    }
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(scheduler_scoring, ScoringFixture)

// A prompt of 45 tokens in chunks of 8: six scoring chunks, one a round (a running stream
// waits for one chunk, not the whole prompt), then its generation runs the last chunk alone
// (keys and values before it are scoring's). Once the whole prompt was scored in one go in
// the round it arrived, then prefilled again: 12 chunks.
BOOST_AUTO_TEST_CASE(a_scored_prompt_runs_a_chunk_a_round_and_generates_from_its_last_chunk) {
  constexpr uint32_t kChunk = 8;
  Scheduler sched(slots(2, kChunk), tok, 4);
  auto scored = std::make_shared<Sequence>(joined_prompts(45), options(1), true);  // sampled, 3 alternatives
  sched.submit({scored});
  const std::vector<GenerationStep> steps = drain(*scored);
  const SchedulerStats st = sched.stats();
  BOOST_TEST(st.prefill_chunks == 6u + 1u);
  BOOST_TEST(st.max_round_prefill_tokens <= kChunk);
  BOOST_TEST(st.prompts_scored == 1u);
  BOOST_TEST(scored->timings().prompt_tokens_cached == 0u);  // the whole prompt ran for it
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  expect_scores(lone, *scored);
  expect_lone(lone, *scored, steps);
}

// OpenAI's n choices with echo and logprobs: the first choice scores the prompt, the others
// take its scores (and, through the prompt cache, its keys and values); a sequence asking
// for other alternatives scores it again.
BOOST_AUTO_TEST_CASE(the_choices_of_one_scored_prompt_score_it_once) {
  constexpr uint32_t kChunk = 8;
  Scheduler sched(slots(3, kChunk), tok, 8);
  const std::vector<uint32_t> p = joined_prompts(20);
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < 5; ++i) {
    GenerationOptions o = options(i);
    o.logprobs = i < 4 ? 2 : 4;
    seqs.push_back(std::make_shared<Sequence>(p, o, true));
  }
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> steps;
  for (auto& s : seqs) steps.push_back(drain(*s));
  BOOST_TEST(sched.stats().prompts_scored == 2u);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (size_t i = 0; i < seqs.size(); ++i) {
    BOOST_TEST_INFO("choice " << i);
    expect_scores(lone, *seqs[i]);
    expect_lone(lone, *seqs[i], steps[i]);
  }
}

// A whole-context prompt scored alone (max_tokens 0) takes 128 rounds of 2 tokens: cancelled
// after its first, it finishes Cancelled and the next sequence gets the slot; scored to the
// end, it finishes Length with every score.
BOOST_AUTO_TEST_CASE(a_prompt_cancelled_while_scored_leaves_its_slot) {
  constexpr uint32_t kChunk = 2;
  Scheduler sched(slots(1, kChunk), tok, 4);
  const GenerationOptions score_only = scoring_only(1);
  const std::vector<uint32_t> whole = joined_prompts(cfg.context_length);
  auto cancelled = std::make_shared<Sequence>(whole, score_only, true);
  auto next = std::make_shared<Sequence>(prompt(1), options(1));
  auto scored = std::make_shared<Sequence>(whole, score_only, true);
  sched.submit({cancelled, next, scored});
  for (int i = 0; i < 30000 && sched.stats().prefill_chunks == 0; ++i)  // at most 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancelled->cancel();
  drain(*cancelled);
  const std::vector<GenerationStep> next_steps = drain(*next);
  drain(*scored);
  BOOST_TEST(cancelled->finish_reason() == FinishReason::Cancelled);
  BOOST_TEST(cancelled->prompt_logprobs().size() < whole.size() - 1);
  BOOST_TEST(scored->finish_reason() == FinishReason::Length);
  BOOST_TEST(sched.stats().prompts_scored == 1u);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  expect_lone(lone, *next, next_steps);
  expect_scores(lone, *scored);
}

// A prompt scored alone (max_tokens 0) leaves its keys and values in the slot as a prompt's
// chunks; the same request again takes the scores and runs nothing, and leaves them there
// too (it once took the slot and dropped them), so a generation from a prompt that begins
// with that one skips its whole chunks.
BOOST_AUTO_TEST_CASE(a_request_with_nothing_to_run_leaves_the_slots_kept_prompt) {
  constexpr uint32_t kChunk = 8;
  Scheduler sched(slots(1, kChunk), tok, 4);
  const GenerationOptions score_only = scoring_only(2);
  const std::vector<uint32_t> scored = joined_prompts(20), longer = joined_prompts(30);
  auto first = std::make_shared<Sequence>(scored, score_only, true);
  auto again = std::make_shared<Sequence>(scored, score_only, true);
  auto generate = std::make_shared<Sequence>(longer, options(2));
  sched.submit({first, again});
  drain(*first);
  drain(*again);
  sched.submit({generate});
  const std::vector<GenerationStep> steps = drain(*generate);
  BOOST_TEST(again->finish_reason() == FinishReason::Length);
  BOOST_TEST(sched.stats().prompts_scored == 1u);
  BOOST_TEST(generate->timings().prompt_tokens_cached == 16u);  // two whole chunks of the scored prompt
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  expect_scores(lone, *again);
  expect_lone(lone, *generate, steps);
}

BOOST_AUTO_TEST_SUITE_END()
