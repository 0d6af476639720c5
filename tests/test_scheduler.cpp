// runtime/scheduler on the bundled model: slots sharing one set of weights run several
// sequences at once, and each sequence's tokens, text and log-probabilities equal a lone
// Generator's on a model of its own (greedy and seeded sampling, stop strings, logprobs); a cancelled
// sequence frees its slot; the queue refuses what does not fit; shutdown cancels what is left.
#include <algorithm>
#include <boost/test/unit_test.hpp>

#include <thread>

#include "tests/support/scheduler_fixture.hpp"

using namespace gptvk;

using test::drain;
using Fixture = test::SchedulerFixture;

BOOST_FIXTURE_TEST_SUITE(scheduler, Fixture)

BOOST_AUTO_TEST_CASE(each_sequence_equals_a_lone_generator) {
  constexpr uint32_t kSequences = 7;
  Scheduler sched(slots(3), tok, 16);
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < kSequences; ++i) seqs.push_back(std::make_shared<Sequence>(prompt(i), options(i)));
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> all;
  for (auto& s : seqs) all.push_back(drain(*s));
  const SchedulerStats st = sched.stats();
  BOOST_TEST(st.active == 0u);
  BOOST_TEST(st.sequences_done == kSequences);
  // The first round admits three at once: their prompts run as one burst (where the device
  // matches a lone prompt step bit for bit: CPU devices).
  if (test::context().cpu_kernels()) BOOST_TEST(st.burst_prompts >= 3u);
  // The scheduler's thread owns the device queue while it runs: the references come after.
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg));
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    expect_lone(lone, *seqs[i], all[i]);
  }
  BOOST_TEST(options(4).stop.size() == 1u);
  BOOST_TEST(seqs[4]->finish_reason() == FinishReason::StopString);
}

// Ten sequences over three prompts arriving together (OpenAI's n choices, or clients sending
// one prompt): each prompt runs once in the first round (in a burst, or on GPUs alone), its
// twins take copies of its keys, values and logits (DecodeBatch), and every sequence still
// equals a lone Generator, its own sampling parameters and seed included.
BOOST_AUTO_TEST_CASE(equal_prompts_arriving_together_run_once_and_each_equals_a_lone_generator) {
  constexpr uint32_t kSequences = 10;
  Scheduler sched(slots(kSequences), tok, 16);
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < kSequences; ++i) seqs.push_back(std::make_shared<Sequence>(prompt(i % 3), options(i)));
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> all;
  for (auto& s : seqs) all.push_back(drain(*s));
  BOOST_TEST(sched.stats().twin_prompts == kSequences - 3);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg));
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    expect_lone(lone, *seqs[i], all[i]);
  }
}

// serve --batch-kernels gemm: batched steps and bursts through the prompts' GEMMs, whose sums
// run in other orders than a lone step's. On CPU devices a greedy sequence's tokens still
// equal a lone Generator's (the logits differ by ~1e-6 of the largest: test_decode_batch);
// on GPUs, where a near-tie may go the other way, every sequence still runs to its end.
BOOST_AUTO_TEST_CASE(gemm_batches_run_every_sequence_as_alone) {
  constexpr uint32_t kSequences = 5;
  Scheduler sched(slots(4), tok, 16, /*exact_rows=*/false);
  GenerationOptions greedy;
  greedy.sampling.temperature = 0;
  greedy.max_tokens = 12;
  greedy.stop_at_end_of_text = false;
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < kSequences; ++i) seqs.push_back(std::make_shared<Sequence>(prompt(i), greedy));
  sched.submit(seqs);
  std::vector<std::vector<uint32_t>> tokens(kSequences);
  for (uint32_t i = 0; i < kSequences; ++i)
    for (const auto& step : drain(*seqs[i]))
      if (step.token) tokens[i].push_back(*step.token);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg));
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    BOOST_TEST(seqs[i]->error().empty());
    BOOST_TEST(seqs[i]->finish_reason() == FinishReason::Length);
    BOOST_TEST(tokens[i].size() == greedy.max_tokens);
    if (!test::context().info().is_cpu()) continue;
    Generator gen(lone, tok);
    gen.start(prompt(i), greedy);
    while (!gen.finished()) gen.next();
    BOOST_TEST(tokens[i] == gen.tokens(), boost::test_tools::per_element());
  }
}

// Prompts of several chunks run one chunk a round between the decode steps of the running
// sequences (at most the budget of prompt tokens a round), and every sequence still equals
// a lone Generator over a model with the same chunk size.
BOOST_AUTO_TEST_CASE(long_prompts_prefill_a_chunk_a_round) {
  constexpr uint32_t kChunk = 8, kSequences = 5;
  Scheduler sched(slots(3, kChunk), tok, 16);
  auto long_prompt = [&](uint32_t i) {
    std::vector<uint32_t> p;
    for (uint32_t k = 0; k <= i; ++k) {
      std::vector<uint32_t> more = prompt(i + k);
      p.insert(p.end(), more.begin(), more.end());
    }
    return p;  // 9 to 45 tokens: 2 to 6 chunks
  };
  std::vector<std::shared_ptr<Sequence>> seqs;
  uint64_t chunks = 0;
  for (uint32_t i = 0; i < kSequences; ++i) {
    seqs.push_back(std::make_shared<Sequence>(long_prompt(i), options(i)));
    chunks += (long_prompt(i).size() + kChunk - 1) / kChunk;
    sched.submit({seqs.back()});
  }
  std::vector<std::vector<GenerationStep>> all;
  for (auto& s : seqs) all.push_back(drain(*s));
  const SchedulerStats st = sched.stats();
  BOOST_TEST(st.prefill_chunks == chunks);
  BOOST_TEST(st.max_round_prefill_tokens <= kChunk);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    BOOST_TEST(seqs[i]->error().empty());
    Generator gen(lone, tok);
    gen.start(long_prompt(i), options(i));
    while (!gen.finished()) gen.next();
    std::vector<uint32_t> tokens;
    for (const auto& s : all[i])
      if (s.token) tokens.push_back(*s.token);
    BOOST_TEST(tokens == gen.tokens());
    BOOST_TEST(seqs[i]->finish_reason() == gen.finish_reason());
  }
}

// More slots than a step has rows (--parallel above --prefill-chunk): the running sequences
// decode in several steps of at most the chunk's rows, each still equal to a lone Generator
// (once, all of them failed: a step of five rows over activations of two).
BOOST_AUTO_TEST_CASE(more_slots_than_a_steps_rows_decode_in_several_steps) {
  constexpr uint32_t kChunk = 2, kSequences = 5;
  Scheduler sched(slots(kSequences, kChunk), tok, 16);
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < kSequences; ++i) seqs.push_back(std::make_shared<Sequence>(prompt(i), options(i)));
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> all;
  for (auto& s : seqs) all.push_back(drain(*s));
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i << ": " << seqs[i]->error());
    expect_lone(lone, *seqs[i], all[i]);
  }
}

// A sequence cancelled while its prompt is still prefilling (or still queued) ends cancelled
// and frees its slot for the next one.
BOOST_AUTO_TEST_CASE(cancel_while_prefilling) {
  Scheduler sched(slots(1, 8), tok, 4);
  std::vector<uint32_t> long_prompt;
  while (long_prompt.size() < 200) {
    std::vector<uint32_t> more = prompt(long_prompt.size());
    long_prompt.insert(long_prompt.end(), more.begin(), more.end());
  }
  long_prompt.resize(200);
  auto cancelled = std::make_shared<Sequence>(long_prompt, options(0));
  auto next = std::make_shared<Sequence>(prompt(1), options(1));
  sched.submit({cancelled, next});
  cancelled->cancel();
  drain(*cancelled);
  drain(*next);
  BOOST_TEST(cancelled->finish_reason() == FinishReason::Cancelled);
  BOOST_TEST(next->error().empty());
  BOOST_TEST(next->timings().generated_tokens > 0u);
}

BOOST_AUTO_TEST_CASE(cancel_frees_the_slot_and_the_queue_is_bounded) {
  Scheduler sched(slots(1), tok, 1);
  GenerationOptions long_run = options(1);
  long_run.max_tokens = 200;
  auto running = std::make_shared<Sequence>(prompt(0), long_run);
  auto waiting = std::make_shared<Sequence>(prompt(1), options(1));
  sched.submit({running});
  std::vector<GenerationStep> first;
  bool ended = false;
  for (int i = 0; i < 600 && first.empty() && !ended; ++i)  // at most 30 s
    ended = running->wait_steps(first, std::chrono::milliseconds(50));
  BOOST_REQUIRE(!first.empty());  // it holds the slot
  sched.submit({waiting});
  BOOST_CHECK_THROW(sched.submit({std::make_shared<Sequence>(prompt(2), options(2))}), QueueFull);
  running->cancel();
  drain(*running);
  BOOST_TEST(running->finish_reason() == FinishReason::Cancelled);
  drain(*waiting);  // it got the slot
  BOOST_TEST(waiting->finish_reason() != FinishReason::Cancelled);
  BOOST_TEST(waiting->timings().generated_tokens > 0u);
  sched.shutdown(std::chrono::milliseconds(0));
  BOOST_CHECK_THROW(sched.submit({std::make_shared<Sequence>(prompt(2), options(2))}), ShuttingDown);
}

// A queued sequence cancelled (its client gone) gives its place back at once, not when a
// slot frees, and finishes without running.
BOOST_AUTO_TEST_CASE(a_cancelled_queued_sequence_gives_its_place_back) {
  Scheduler sched(slots(1), tok, 1);
  GenerationOptions long_run = options(1);
  long_run.max_tokens = 200;
  auto running = std::make_shared<Sequence>(prompt(0), long_run);
  sched.submit({running});
  auto left = std::make_shared<Sequence>(prompt(1), options(1));
  sched.submit({left});
  BOOST_CHECK_THROW(sched.submit({std::make_shared<Sequence>(prompt(2), options(2))}), QueueFull);
  left->cancel();
  auto next = std::make_shared<Sequence>(prompt(2), options(2));
  BOOST_CHECK_NO_THROW(sched.submit({next}));
  drain(*left);
  BOOST_TEST(left->finish_reason() == FinishReason::Cancelled);
  BOOST_TEST(left->timings().generated_tokens == 0u);
  running->cancel();
  drain(*running);
  drain(*next);
  BOOST_TEST(next->timings().generated_tokens > 0u);
  // The one that left from the queue is counted as finished too (/metrics' sequences).
  const SchedulerStats st = sched.stats();
  BOOST_TEST(st.sequences_done == 3u);
  BOOST_TEST(st.active == 0u);
  BOOST_TEST(st.queued == 0u);
}

BOOST_AUTO_TEST_CASE(a_bad_prompt_fails_its_sequence_only) {
  Scheduler sched(slots(2), tok, 4);
  auto too_long = std::make_shared<Sequence>(std::vector<uint32_t>(cfg.context_length, 11), options(0));
  auto fine = std::make_shared<Sequence>(prompt(0), options(0));
  sched.submit({too_long, fine});
  drain(*too_long);
  drain(*fine);
  BOOST_TEST(too_long->error().find("context") != std::string::npos);
  BOOST_TEST(fine->error().empty());
  BOOST_TEST(fine->timings().generated_tokens == options(0).max_tokens);
}

// The prompt cache: a slot keeps its last prompt's keys and values, a prompt that begins with
// whole chunks of it goes to that slot and skips them, and its tokens and log-probabilities
// are still a lone Generator's, bit for bit, over a model of the same chunk size.
BOOST_AUTO_TEST_CASE(prompt_cache_skips_kept_chunks_with_the_same_results) {
  constexpr uint32_t kChunk = 8;
  const std::vector<uint32_t> base = joined_prompts(40);
  auto with_tail = [&](size_t keep, uint32_t tail_from) {
    std::vector<uint32_t> p(base.begin(), base.begin() + keep), tail = joined_prompts(13, tail_from);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  auto other = base;
  other[3] = tok.encode(" Yes")[0];  // differs in the first chunk: nothing to keep
  struct Case {
    std::vector<uint32_t> prompt;
    uint32_t options, cached;
  };
  const std::vector<Case> cases = {
      {base, 1, 0},               // slot 0 keeps 40 tokens
      {with_tail(0, 50), 2, 0},   // no common chunk: the least recently used slot, 1
      {base, 5, 40},              // the same prompt: all of it, and the logits of its first token
      {with_tail(27, 60), 3, 24},  // three whole chunks of slot 0's prompt
      {other, 6, 0},
  };
  Scheduler sched(slots(2, kChunk), tok, 4);
  std::vector<std::shared_ptr<Sequence>> seqs;
  std::vector<std::vector<GenerationStep>> all;
  for (const Case& c : cases) {  // one at a time: each finds the slots as the one before left them
    seqs.push_back(std::make_shared<Sequence>(c.prompt, options(c.options)));
    sched.submit({seqs.back()});
    all.push_back(drain(*seqs.back()));
  }
  BOOST_TEST(sched.stats().prompt_tokens_cached == 24u + 40u);
  BOOST_TEST(sched.stats().prompt_cache_hits == 1u);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (size_t i = 0; i < cases.size(); ++i) {
    BOOST_TEST_INFO("case " << i);
    BOOST_TEST(seqs[i]->error().empty());
    BOOST_TEST(seqs[i]->timings().prompt_tokens_cached == cases[i].cached);
    Generator gen(lone, tok);
    gen.start(cases[i].prompt, options(cases[i].options));
    while (!gen.finished()) gen.next();
    std::vector<uint32_t> tokens;
    std::vector<float> logprobs;
    for (const auto& s : all[i]) {
      if (s.token) tokens.push_back(*s.token);
      if (s.logprob) logprobs.push_back(s.logprob->logprob);
    }
    BOOST_TEST(tokens == gen.tokens());
    BOOST_TEST(logprobs.size() == gen.logprobs().size());
    for (size_t k = 0; k < std::min(logprobs.size(), gen.logprobs().size()); ++k)
      BOOST_TEST(logprobs[k] == gen.logprobs()[k].logprob);  // bit for bit
  }
}

// Exact hits: a prompt that ran whole before runs nothing again. Its first token is drawn
// from the logits its earlier run kept, with the new sequence's own parameters and seed,
// over keys and values kept in the slot or copied from another (a running one's too), and
// every sequence still equals a lone Generator, bit for bit. Three arrive together after
// the first: one takes the holder's slot, the others copy from it. A sequence with
// sampling controls (a repeat penalty) runs its prompt.
BOOST_AUTO_TEST_CASE(a_repeated_prompt_draws_from_its_kept_logits) {
  const std::vector<uint32_t> p = joined_prompts(30);
  Scheduler sched(slots(4, 8), tok, 4);
  std::vector<std::shared_ptr<Sequence>> seqs = {std::make_shared<Sequence>(p, options(1))};
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> all = {drain(*seqs[0])};
  GenerationOptions penalised = options(2);
  penalised.sampling.repeat_penalty = 1.3f;
  std::vector<std::shared_ptr<Sequence>> again;
  for (const GenerationOptions& o : {options(2), options(3), options(5), penalised})
    again.push_back(std::make_shared<Sequence>(p, o));
  sched.submit(again);
  for (auto& s : again) all.push_back(drain(*s)), seqs.push_back(s);
  BOOST_TEST(sched.stats().prompt_cache_hits == 3u);
  sched.shutdown(std::chrono::milliseconds(0));
  for (size_t i = 1; i < 4; ++i) BOOST_TEST(seqs[i]->timings().prompt_tokens_cached == p.size());
  BOOST_TEST(seqs[4]->timings().prompt_tokens_cached < p.size());
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), 8);
  for (size_t i = 0; i < seqs.size(); ++i) {
    BOOST_TEST_INFO("sequence " << i);
    expect_lone(lone, *seqs[i], all[i]);
  }
}

// A conversation's next turn: while the scheduler is idle, the free slot runs its last
// sequence's prompt and reply as prompt chunks, so a prompt holding that reply keeps it too,
// with a lone Generator's tokens and log-probabilities, bit for bit.
// A slot that is still running lends its prompt's whole chunks: a new sequence sharing 27
// tokens with it (three chunks of 8) goes to the free slot, which keeps nothing, and copies
// those chunks' keys and values from the running one (GptModel::copy_prompt_prefix).
BOOST_AUTO_TEST_CASE(a_running_slots_prompt_chunks_are_copied_for_a_new_sequence) {
  constexpr uint32_t kChunk = 8;
  const std::vector<uint32_t> base = joined_prompts(40);
  GenerationOptions lengthy = options(0);
  lengthy.max_tokens = 200;
  lengthy.stop_at_end_of_text = false;
  Scheduler sched(slots(2, kChunk), tok, 4);
  auto running = std::make_shared<Sequence>(base, lengthy);
  sched.submit({running});
  std::vector<GenerationStep> first;
  for (int i = 0; i < 600 && first.empty(); ++i) running->wait_steps(first, std::chrono::milliseconds(50));
  BOOST_REQUIRE(!first.empty());  // its prompt ran: it decodes now
  std::vector<uint32_t> prompt(base.begin(), base.begin() + 27), tail = joined_prompts(13, 60);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  auto seq = std::make_shared<Sequence>(prompt, options(3));
  sched.submit({seq});
  const std::vector<GenerationStep> steps = drain(*seq);
  running->cancel();
  drain(*running);
  BOOST_TEST(seq->timings().prompt_tokens_cached == 24u);
  BOOST_TEST(sched.stats().prompt_tokens_copied == 24u);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  expect_lone(lone, *seq, steps);
}

// The prompt-cache counters count a sequence once its prompt has run, with what it really
// reused: one cancelled while its prompt runs (here 24 of 224 tokens kept, 200 left to run
// one token a round) reports no usage and is not counted either.
BOOST_AUTO_TEST_CASE(a_sequence_cancelled_while_its_prompt_runs_is_not_counted_as_cached) {
  const std::vector<uint32_t> base = joined_prompts(40);
  Scheduler sched(slots(1, /*max_chunk=*/1), tok, 4);
  auto first = std::make_shared<Sequence>(base, options(0));
  sched.submit({first});
  drain(*first);
  std::vector<uint32_t> prompt(base.begin(), base.begin() + 24), tail = joined_prompts(200, 60);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  auto seq = std::make_shared<Sequence>(prompt, options(1));
  sched.submit({seq});
  for (int i = 0; i < 10000 && sched.stats().queued > 0; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  seq->cancel();
  const std::vector<GenerationStep> steps = drain(*seq);
  if (std::any_of(steps.begin(), steps.end(), [](const GenerationStep& s) { return s.token.has_value(); })) {
    BOOST_TEST_MESSAGE("its 200 prompt tokens ran before the cancel was seen; nothing to check");
    return;
  }
  BOOST_TEST(sched.stats().prompt_tokens_cached == 0u);
  BOOST_TEST(sched.stats().prompt_tokens_copied == 0u);
  // The next sequence of that prompt finds those 24 tokens again (and those the cancelled
  // one ran), and they are counted.
  auto again = std::make_shared<Sequence>(prompt, options(1));
  sched.submit({again});
  drain(*again);
  BOOST_TEST(again->timings().prompt_tokens_cached >= 24u);
  BOOST_TEST(sched.stats().prompt_tokens_cached == again->timings().prompt_tokens_cached);
}

// The n choices of a long prompt (four sequences, one 40-token prompt, chunks of 8): the
// first runs its chunks, one a round; the others, admitted when its last chunk is due, copy
// its four whole chunks and join that last chunk's burst as twins. Each equals a lone run.
BOOST_AUTO_TEST_CASE(equal_long_prompts_run_their_chunks_once) {
  constexpr uint32_t kChunk = 8, kSequences = 4;
  const std::vector<uint32_t> prompt = joined_prompts(40);
  Scheduler sched(slots(kSequences, kChunk), tok, 4);
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (uint32_t i = 0; i < kSequences; ++i) seqs.push_back(std::make_shared<Sequence>(prompt, options(i)));
  sched.submit(seqs);
  std::vector<std::vector<GenerationStep>> all;
  for (auto& s : seqs) all.push_back(drain(*s));
  BOOST_TEST(sched.stats().prompt_tokens_copied == (kSequences - 1) * 32u);
  BOOST_TEST(sched.stats().twin_prompts == kSequences - 1);
  BOOST_TEST(sched.stats().prefill_chunks == 5u);  // the first sequence's, and no other
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (uint32_t i = 0; i < kSequences; ++i) {
    BOOST_TEST_INFO("sequence " << i);
    expect_lone(lone, *seqs[i], all[i]);
  }
}

// run_prompts_together (generate's several prompts): a prompt whose first whole chunks an
// earlier one ran copies them (27 shared tokens: three chunks of 8; the same 40 tokens:
// four, then its last chunk is a twin's); each generator's tokens equal a lone one's.
BOOST_AUTO_TEST_CASE(prompts_run_together_copy_the_chunks_an_earlier_one_ran) {
  constexpr uint32_t kChunk = 8;
  const std::vector<uint32_t> base = joined_prompts(40);
  std::vector<uint32_t> shares(base.begin(), base.begin() + 27), tail = joined_prompts(13, 60);
  shares.insert(shares.end(), tail.begin(), tail.end());
  const std::vector<std::vector<uint32_t>> prompts = {base, shares, base};
  const uint32_t want_cached[] = {0, 24, 32};
  auto models = slots(3, kChunk);
  std::vector<std::unique_ptr<Generator>> gens;
  std::vector<Generator*> started;
  for (size_t i = 0; i < prompts.size(); ++i) {
    gens.push_back(std::make_unique<Generator>(*models[i], tok));
    gens.back()->begin(prompts[i], options(static_cast<uint32_t>(i)));
    started.push_back(gens.back().get());
  }
  DecodeBatch batch;
  run_prompts_together(batch, started);
  BOOST_TEST(batch.twin_prompts() == 1u);
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  for (size_t i = 0; i < prompts.size(); ++i) {
    BOOST_TEST_INFO("prompt " << i);
    BOOST_TEST(gens[i]->timings().prompt_tokens_cached == want_cached[i]);
    while (!gens[i]->finished()) gens[i]->next();
    Generator ref(lone, tok);
    ref.start(prompts[i], options(static_cast<uint32_t>(i)));
    while (!ref.finished()) ref.next();
    BOOST_TEST(gens[i]->tokens() == ref.tokens());
    BOOST_REQUIRE(gens[i]->logprobs().size() == ref.logprobs().size());
    for (size_t k = 0; k < ref.logprobs().size(); ++k)
      BOOST_TEST(gens[i]->logprobs()[k].logprob == ref.logprobs()[k].logprob);  // bit for bit
  }
}

BOOST_AUTO_TEST_CASE(an_idle_slot_keeps_the_reply_for_the_next_turn) {
  constexpr uint32_t kChunk = 8;
  const std::vector<uint32_t> first = joined_prompts(20);
  GenerationOptions reply = options(0);  // greedy
  reply.max_tokens = 20;
  reply.stop_at_end_of_text = false;
  Scheduler sched(slots(1, kChunk), tok, 4);
  auto turn1 = std::make_shared<Sequence>(first, reply);
  sched.submit({turn1});
  std::vector<uint32_t> second = first;
  for (const auto& s : drain(*turn1))
    if (s.token) second.push_back(*s.token);
  BOOST_REQUIRE(second.size() == 40u);
  // The first prompt filled 16 tokens' whole chunks; 40 tokens are 5: 3 more run idle.
  for (int i = 0; i < 600 && sched.stats().cache_refill_chunks < 3; ++i)  // at most 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(sched.stats().cache_refill_chunks == 3u);
  for (uint32_t id : tok.encode(" and so on, said she.")) second.push_back(id);
  auto turn2 = std::make_shared<Sequence>(second, options(3));
  sched.submit({turn2});
  std::vector<GenerationStep> steps = drain(*turn2);
  BOOST_TEST(turn2->timings().prompt_tokens_cached == 40u);
  sched.shutdown(std::chrono::milliseconds(0));
  GptModel lone(test::context(), cfg, load_weights(test::context(), cfg), kChunk);
  Generator gen(lone, tok);
  gen.start(second, options(3));
  while (!gen.finished()) gen.next();
  std::vector<uint32_t> tokens;
  std::vector<float> logprobs;
  for (const auto& s : steps) {
    if (s.token) tokens.push_back(*s.token);
    if (s.logprob) logprobs.push_back(s.logprob->logprob);
  }
  BOOST_TEST(tokens == gen.tokens());
  BOOST_REQUIRE(logprobs.size() == gen.logprobs().size());
  for (size_t k = 0; k < logprobs.size(); ++k) BOOST_TEST(logprobs[k] == gen.logprobs()[k].logprob);  // bit for bit
}

// Without the prompt cache every prompt runs whole, and an idle slot refills no chunks of
// what it ran (nothing kept is used again).
BOOST_AUTO_TEST_CASE(prompt_cache_off_runs_every_chunk) {
  const std::vector<uint32_t> p = joined_prompts(30);
  Scheduler sched(slots(1, 8), tok, 4, true, 0, /*prompt_cache=*/false);
  for (int i = 0; i < 2; ++i) {
    auto seq = std::make_shared<Sequence>(p, options(1));
    sched.submit({seq});
    drain(*seq);
    BOOST_TEST(seq->timings().prompt_tokens_cached == 0u);
  }
  BOOST_TEST(sched.stats().prompt_tokens_cached == 0u);
  BOOST_TEST(sched.stats().prefill_chunks == 2 * ((p.size() + 7) / 8));
  // With the cache on, an idle slot refills its first chunk within milliseconds (the test above).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  BOOST_TEST(sched.stats().cache_refill_chunks == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
