// Several sequences at once over a pool of KV slots: each slot is a GptModel of its own (KV
// cache, activations, graphs) over weights the slots share. One thread, the scheduler's,
// does all the Vulkan work, in rounds: prompt chunks first (of sequences still prefilling,
// then of queued ones taking free slots; the last chunks of several prompts, those that
// sample a first token, run in bursts of up to kBurstPrompts, and each first token is sent
// as soon as its burst ran; a prompt equal to another's in its burst runs once for both;
// prompts that arrive while a round's last burst runs join that round), at most
// `prefill_budget` tokens of them a round, then one batched decode step of every
// running sequence (models/decode_batch.hpp). A new sequence waits for at most one step,
// and a long prompt delays the running streams by one chunk a round, not by its whole
// prefill.
// Sequences join and leave between steps; a cancelled one leaves at the next step. Each slot runs its
// sequence exactly as a lone Generator would, so a sequence's tokens do not depend on what
// else runs (greedy and seeded sampling alike): with exact rows (the default) the batched
// step computes each row as the one-token step does, bit for bit, logits included.
//
// Other threads (an HTTP server's) submit Sequences and read their steps as they come:
//
//   auto seq = std::make_shared<Sequence>(prompt_ids, options);
//   scheduler.submit({seq});                     // throws QueueFull when the queue is full
//   std::vector<GenerationStep> steps;
//   while (!seq->wait_steps(steps, 100ms)) ...;   // steps arrive in order
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "models/decode_batch.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "runtime/generator.hpp"

namespace gptvk {

// One sequence's request and, as it runs, its results. Shared by the submitter (any thread)
// and the scheduler.
class Sequence {
 public:
  // prompt_logprobs: also score the prompt (each prompt token after the first gets its
  // log-probability and options.logprobs alternatives; OpenAI's echo with logprobs). The
  // prompt is scored a chunk a round, as prompts prefill; a sequence with the prompt and
  // alternatives that the scheduler scored last (OpenAI's n choices) takes those scores.
  // options.max_tokens 0 generates nothing: the sequence finishes (Length) once the prompt
  // is scored, and its prompt may fill the whole context.
  Sequence(std::vector<uint32_t> prompt, GenerationOptions options, bool prompt_logprobs = false);

  const std::vector<uint32_t>& prompt() const { return prompt_; }
  const GenerationOptions& options() const { return options_; }

  // Moves the steps that arrived to `out` (appending), waiting up to `timeout` when there are
  // none yet. Returns true once the sequence has finished and every step was taken.
  bool wait_steps(std::vector<GenerationStep>& out, std::chrono::milliseconds timeout);
  // Any thread: the scheduler stops the sequence at its next step (a queued one never starts).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Valid once wait_steps returned true.
  FinishReason finish_reason() const;
  const std::string& error() const { return error_; }  // non-empty: it failed (the message)
  const GenerationTimings& timings() const { return timings_; }
  // With prompt_logprobs: one entry per prompt token after the first.
  const std::vector<TokenLogprob>& prompt_logprobs() const { return prompt_logprobs_; }
  bool wants_prompt_logprobs() const { return want_prompt_logprobs_; }

 private:
  friend class Scheduler;
  bool needs_prompt_scores() const { return want_prompt_logprobs_ && !prompt_scored_; }
  void push(GenerationStep step);
  void finish(FinishReason why, const GenerationTimings& timings, std::string error = {});

  const std::vector<uint32_t> prompt_;
  const GenerationOptions options_;
  const bool want_prompt_logprobs_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationStep> steps_;
  bool done_ = false;
  // Written by the scheduler before done_ (under mu_), read after wait_steps saw done_.
  FinishReason reason_ = FinishReason::None;
  std::string error_;
  GenerationTimings timings_;
  std::vector<TokenLogprob> prompt_logprobs_;
  bool prompt_scored_ = false;  // the scheduler's thread only
};

// The queue has no room for a request (HTTP 429).
class QueueFull : public std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The scheduler stopped admitting work (HTTP 503).
class ShuttingDown : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SchedulerStats {
  size_t slots = 0, active = 0, queued = 0, max_queue = 0;
  uint64_t sequences_done = 0, prompt_tokens = 0, generated_tokens = 0;
  double step_seconds = 0;  // time spent in rounds (every slot's step and the admissions between)
  uint64_t step_tokens = 0;  // tokens those rounds made (first tokens included)
  uint64_t prefill_chunks = 0;  // prompt chunks run
  uint64_t burst_prompts = 0;   // prompts whose last chunk ran in a burst with others' (prefill_together)
  uint64_t twin_prompts = 0;    // of those, twins: another's equal prompt ran for them (DecodeBatch)
  uint32_t max_round_prefill_tokens = 0;  // most prompt tokens one round ran before its decode step
  // Of the sequences whose prompt has run: prompt tokens whose keys and values a slot kept
  // (the prompt cache; the sum of their timings' prompt_tokens_cached), and of those, the
  // tokens copied from another slot's cache.
  uint64_t prompt_tokens_cached = 0;
  uint64_t prompt_tokens_copied = 0;
  uint64_t cache_refill_chunks = 0;       // chunks of finished sequences' replies run while idle (prompt cache)
  uint64_t prompt_cache_hits = 0;  // first tokens drawn from a prompt's kept logits: the prompt ran before whole
  // Prompts scored (echo with logprobs); a sequence given the scores of the prompt scored
  // last is not counted.
  uint64_t prompts_scored = 0;
};

class Scheduler {
 public:
  // `slots`: models sharing one set of loaded weights, from now on used only by the
  // scheduler's thread (started here). Beyond the free slots, at most `max_queue` sequences
  // wait for one.
  // `exact_rows`: DecodeBatch's bit-identical rows; false: its B-row GEMMs (each weight read
  // once a step; logits then differ from a lone sequence's in the last bits).
  // `prefill_budget`: most prompt tokens a round runs before its decode step (at least one
  // chunk runs); 0: the slots' chunk (GptModel::max_chunk).
  // `prompt_cache`: a slot keeps the keys and values of the last prompt it ran, and a new
  // sequence goes to the free slot whose kept prompt shares the most whole chunks with its
  // own, which then do not run again (Generator::begin's reuse; the same results). Where
  // another slot, running or free, keeps more of them, they are copied from its cache
  // (GptModel::copy_prompt_prefix): concurrent users of one long preamble, or the n
  // choices of a long prompt, run its chunks once. While
  // nothing else runs, a free slot also runs the whole chunks of its last sequence's prompt
  // and reply that its prompt did not fill, as a prompt's chunks (a decode step computes
  // keys and values in another order), so that the next turn of a conversation, whose
  // prompt holds that reply, skips them too. That starts after kRefillDelay without work; a
  // request arriving during such a chunk waits for it.
  // A prompt equal to one that ran whole before, which a slot still keeps with the logits
  // its first token was drawn from, runs nothing at all: its first token is drawn from those
  // logits with its own parameters and seed (DecodeBatch::sample_kept: the same token as
  // running it), so a retry, a regeneration or many clients sending one prompt wait for no
  // prompt. Not for sequences that use the sampling controls.
  Scheduler(std::vector<std::unique_ptr<GptModel>> slots, const Tokenizer& tokenizer, size_t max_queue,
            bool exact_rows = true, uint32_t prefill_budget = 0, bool prompt_cache = true);
  ~Scheduler();  // shutdown(0)
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues every sequence or none: QueueFull when the free slots and queue places left are
  // fewer than given,
  // ShuttingDown after shutdown().
  void submit(const std::vector<std::shared_ptr<Sequence>>& seqs);
  // Stops admitting new sequences; queued and running ones go on until they finish or
  // `grace` has passed, then are cancelled. Returns when the thread has exited.
  void shutdown(std::chrono::milliseconds grace);
  SchedulerStats stats() const;
  size_t slots() const { return slots_.size(); }

 private:
  struct Slot {
    std::unique_ptr<GptModel> model;
    std::unique_ptr<Generator> gen;
    std::shared_ptr<Sequence> seq;  // null: free
    uint64_t admitted = 0;          // admission order: the longest-waiting prompt runs first
    // The prompt cache: the running sequence's prompt, or the last sequence's (and, once it
    // ran whole, its generated tokens); the slot's KV cache holds the keys and values of
    // the first kept_tokens() of them as a prompt's chunks compute them: while a sequence
    // runs, those its prompt ran (`scored` while it is scored, then
    // Generator::prompt_tokens_in_cache); when free, `kept` (the same at release, then
    // refill_chunk's).
    std::vector<uint32_t> tokens;
    size_t kept = 0;
    uint64_t released = 0;  // release order: among equals the least recently used slot is taken
    // The model kept the logits that the first token of the prompt tokens[0, logits_for) was
    // drawn from (0: none), beside its keys and values while kept_tokens() covers them.
    size_t logits_for = 0;
    bool from_kept = false;  // the running sequence's first token is to be drawn from those
    // Of the running sequence's prompt, the tokens whose keys and values this slot itself
    // kept (the others it reuses were copied from other slots), and whether its reused
    // tokens went into the stats (once its prompt has run).
    uint32_t own_cached = 0;
    bool cache_counted = false;
    // The running sequence's prompt is being scored (echo with logprobs), a chunk a round,
    // before its generator begins; `scored` of its tokens have run. The generator then runs
    // its last chunk only (its keys and values before are those scoring computed), and the
    // sequence, its prompt `scored_here` (not its scores taken from the last scored), reports
    // none of its prompt as cached.
    bool scoring = false;
    bool scored_here = false;
    uint32_t scored = 0;
  };
  // The prompt scored last, with `k` alternatives a token, and its scores.
  struct ScoredPrompt {
    std::vector<uint32_t> prompt;
    uint32_t k = 0;
    std::vector<TokenLogprob> scores;
  };
  // Most prompts that run in one burst (their twins join free): a burst hands out every
  // first token when it ends, so a round with many new prompts runs several smaller ones,
  // the first tokens of each going out before the next runs. 8 gave 16 simultaneous
  // clients the shortest median time to first token (bench/PERFORMANCE.md, "Batched
  // decode").
  static constexpr size_t kBurstPrompts = 8;
  // How long the scheduler is idle before a free slot runs a chunk of its last reply again
  // for the prompt cache (refill_chunk).
  static constexpr std::chrono::milliseconds kRefillDelay{100};
  void loop();
  // A round's prompt chunks, within prefill_budget_ tokens (at least one chunk): those of
  // sequences already prefilling, oldest first, then queued sequences' in free slots. The
  // last chunks (those that sample a first token) run together, one burst of up to a chunk's
  // rows (prefill_together), the others one by one. A sequence whose last chunk ran hands
  // out its first token. Sequences queued while the last burst ran join the round too,
  // within the budget. Returns the tokens handed out.
  size_t prefill_round();
  // The prefilling slot admitted first and not in `skip`, or a free slot given the next
  // queued sequence; null when neither is left.
  Slot* next_to_prefill(std::span<Slot* const> skip);
  // Runs these slots' last chunks as one burst (DecodeBatch::sample_after_prefill: each
  // sequence's results as its own) and hands out their first tokens; returns how many.
  size_t prefill_together(std::span<Slot* const> together);
  void admit(Slot& slot, std::shared_ptr<Sequence> seq);
  size_t kept_tokens(const Slot& slot) const;  // see Slot::tokens
  // The prompt cache is on and seq may take from it: it generates, from a prompt of its
  // own, with no prompt scores left to compute (scoring runs the prompt whole).
  bool may_use_prompt_cache(const Sequence& seq) const;
  // Gives seq the scores of the prompt scored last when it asks for those.
  void take_last_scores(Sequence& seq) const;
  // Runs the next chunk of the slot's prompt scoring; after the last, the sequence finishes
  // (max_tokens 0) or its generator begins.
  void score_chunk(Slot& slot);
  // The prompt tokens that seq's usage and the stats count as cached.
  uint32_t cached_prompt_tokens(const Slot& slot) const;
  // Prompt tokens of `seq` whose keys and values `slot` holds, in whole chunks, leaving one
  // token or more to run (0 without the prompt cache, or for a sequence that is to score
  // its prompt, which runs it whole).
  uint32_t reusable(const Slot& slot, const Sequence& seq) const;
  // A slot (`target` first) whose kept logits and keys and values are those of seq's whole
  // prompt; null if none, or if seq cannot use them (the prompt cache off, prompt scores
  // to compute, sampling controls on).
  const Slot* holder_of(const Sequence& seq, const Slot& target) const;
  // After a last chunk ran: those of these slots that drew their first token from logits of
  // their own (the first of equal prompts only; not failed ones) ...
  std::vector<Slot*> first_logits_to_keep(std::span<Slot* const> slots) const;
  // ... keep them, copied once their first tokens went out (before the device runs again).
  void keep_first_logits(std::span<Slot* const> keep);
  // The free slot for `seq`: the one that keeps the most of its prompt, else the least
  // recently used. Null when every slot is taken.
  Slot* free_slot_for(const Sequence* seq);
  // A free slot with a whole chunk of its tokens past the kept ones; null if none.
  Slot* slot_to_refill();
  // Runs that chunk as a prompt chunk (keys and values only) and keeps it.
  void refill_chunk(Slot& slot);
  void step(Slot& slot);
  // One batched decode step of every running sequence that is due one; each then hands out
  // its token (step). Returns the tokens handed out.
  uint64_t step_all();
  // Frees the slot; the sequence finishes as its generator did, failed with `error`, or as `why` says.
  void release(Slot& slot, std::string error = {}, std::optional<FinishReason> why = {});
  std::shared_ptr<Sequence> next_queued();  // null when none
  // Under mu_: finishes the queued sequences that were cancelled and gives their places back
  // (a client that left while it waited), so that they neither hold the queue nor run.
  void drop_cancelled_queued();
  bool cancel_due() const;

  const Tokenizer& tok_;
  const size_t max_queue_;
  const uint32_t prefill_budget_;
  const bool prompt_cache_;
  uint64_t admissions_ = 0, releases_ = 0;
  std::vector<Slot> slots_;
  DecodeBatch batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Sequence>> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point cancel_at_;
  std::optional<ScoredPrompt> last_scored_;
  SchedulerStats stats_;  // under mu_
  std::thread thread_;    // last: started once the rest exists
};

}  // namespace gptvk
