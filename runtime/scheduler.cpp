#include "runtime/scheduler.hpp"

#include <algorithm>
#include <new>
#include <exception>
#include <span>
#include <utility>

namespace gptvk {

namespace {
using Clock = std::chrono::steady_clock;

// The most of n tokens that whole chunks of `chunk` tokens hold.
size_t whole_chunks(size_t n, uint32_t chunk) { return n / chunk * chunk; }

// Whether g's last chunk is a twin of one of `others`' in a burst: the same prompt from the
// same position on, which DecodeBatch runs once for both.
bool has_twin(const Generator& g, std::span<const Generator* const> others) {
  return std::any_of(others.begin(), others.end(), [&](const Generator* o) {
    return o->next_chunk_begin() == g.next_chunk_begin() && std::ranges::equal(o->prompt(), g.prompt());
  });
}
}  // namespace

Sequence::Sequence(std::vector<uint32_t> prompt, GenerationOptions options, bool prompt_logprobs)
    : prompt_(std::move(prompt)), options_(std::move(options)), want_prompt_logprobs_(prompt_logprobs) {}

bool Sequence::wait_steps(std::vector<GenerationStep>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (steps_.empty() && !done_) cv_.wait_for(lock, timeout, [&] { return !steps_.empty() || done_; });
  for (auto& s : steps_) out.push_back(std::move(s));
  steps_.clear();
  return done_;
}

FinishReason Sequence::finish_reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

void Sequence::push(GenerationStep step) {
  {
    std::lock_guard lock(mu_);
    steps_.push_back(std::move(step));
  }
  cv_.notify_all();
}

void Sequence::finish(FinishReason why, const GenerationTimings& timings, std::string error) {
  {
    std::lock_guard lock(mu_);
    reason_ = why;
    timings_ = timings;
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

Scheduler::Scheduler(std::vector<std::unique_ptr<GptModel>> slots, const Tokenizer& tokenizer, size_t max_queue,
                     bool exact_rows, uint32_t prefill_budget, bool prompt_cache)
    : tok_(tokenizer),
      max_queue_(max_queue),
      prefill_budget_(prefill_budget ? prefill_budget : slots.empty() ? 1 : slots[0]->max_chunk()),
      prompt_cache_(prompt_cache),
      batch_(exact_rows) {
  for (auto& m : slots) {
    Slot s;
    s.gen = std::make_unique<Generator>(*m, tok_);
    s.model = std::move(m);
    slots_.push_back(std::move(s));
  }
  stats_.slots = slots_.size();
  stats_.max_queue = max_queue_;
  std::vector<GptModel*> models;
  for (Slot& s : slots_) models.push_back(s.model.get());
  batch_.warm_up(models);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(std::chrono::milliseconds(0)); }

void Scheduler::submit(const std::vector<std::shared_ptr<Sequence>>& seqs) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw ShuttingDown("the server is shutting down");
    drop_cancelled_queued();
    // Free slots take sequences at once; beyond them, max_queue_ may wait.
    const size_t room = max_queue_ + (stats_.slots - stats_.active);
    if (queue_.size() + seqs.size() > room)
      throw QueueFull("the server is busy: " + std::to_string(stats_.active) + " sequences running, " +
                      std::to_string(queue_.size()) + " of " + std::to_string(max_queue_) + " queue places taken, " +
                      std::to_string(seqs.size()) + " asked for; retry later");
    for (const auto& s : seqs) queue_.push_back(s);
    stats_.queued = queue_.size();
  }
  cv_.notify_all();
}

void Scheduler::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_ || Clock::now() + grace < cancel_at_) cancel_at_ = Clock::now() + grace;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Scheduler::cancel_due() const { return stopping_ && Clock::now() >= cancel_at_; }

void Scheduler::drop_cancelled_queued() {
  const auto cancelled = [this](const std::shared_ptr<Sequence>& seq) {
    if (!seq->cancelled()) return false;
    ++stats_.sequences_done;  // before it says it finished, as release() counts
    seq->finish(FinishReason::Cancelled, {});
    return true;
  };
  std::erase_if(queue_, cancelled);
  stats_.queued = queue_.size();
}

std::shared_ptr<Sequence> Scheduler::next_queued() {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return nullptr;
  auto seq = std::move(queue_.front());
  queue_.pop_front();
  stats_.queued = queue_.size();
  ++stats_.active;  // in the same step as leaving the queue, so submit() never counts it twice or not at all
  return seq;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      drop_cancelled_queued();
      auto busy = [&] {
        if (!queue_.empty()) return true;
        for (const Slot& s : slots_)
          if (s.seq) return true;
        return false;
      };
      if (!busy()) {
        if (stopping_) return;
        // Idle for kRefillDelay: one chunk of a finished reply for the prompt cache. A client
        // that sends its next request at once (a script) does not wait for it.
        Slot* refill = slot_to_refill();
        if (!refill) {
          cv_.wait(lock, [&] { return busy() || stopping_; });
        } else if (!cv_.wait_for(lock, kRefillDelay, [&] { return busy() || stopping_; })) {
          lock.unlock();
          refill_chunk(*refill);
        }
        continue;
      }
      if (cancel_due()) {
        for (Slot& s : slots_)
          if (s.seq) s.seq->cancel();
        for (auto& q : queue_) q->cancel();
      }
    }
    // Before each step, prompt chunks: a new request waits for at most one batched step
    // before its prompt starts (time to first token).
    auto t0 = Clock::now();
    uint64_t made = prefill_round();
    made += step_all();
    std::lock_guard lock(mu_);
    stats_.step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    stats_.step_tokens += made;
  }
}

Scheduler::Slot* Scheduler::next_to_prefill(std::span<Slot* const> skip) {
  Slot* oldest = nullptr;
  for (Slot& s : slots_)
    if (s.seq && (s.scoring || s.gen->prefilling()) && (!oldest || s.admitted < oldest->admitted) &&
        std::find(skip.begin(), skip.end(), &s) == skip.end())
      oldest = &s;
  if (oldest) return oldest;
  if (!free_slot_for(nullptr)) return nullptr;
  for (auto seq = next_queued(); seq; seq = next_queued()) {
    take_last_scores(*seq);
    Slot& s = *free_slot_for(seq.get());
    admit(s, std::move(seq));
    if (s.seq) return &s;  // else cancelled, refused or finished at once: the slot is still free
  }
  return nullptr;  // the queue is empty
}

size_t Scheduler::kept_tokens(const Slot& slot) const {
  if (!slot.seq) return slot.kept;
  if (slot.scoring) return slot.scored;
  // A sequence whose first token comes from kept logits holds its whole prompt already.
  if (slot.from_kept) return slot.logits_for;
  return std::min<size_t>(slot.gen->prompt_tokens_in_cache(), slot.tokens.size());
}

bool Scheduler::may_use_prompt_cache(const Sequence& seq) const {
  return prompt_cache_ && !seq.needs_prompt_scores() && seq.options().max_tokens > 0 && !seq.prompt().empty();
}

void Scheduler::take_last_scores(Sequence& seq) const {
  if (!seq.needs_prompt_scores() || !last_scored_ || last_scored_->k != seq.options().logprobs ||
      last_scored_->prompt != seq.prompt())
    return;
  seq.prompt_logprobs_ = last_scored_->scores;
  seq.prompt_scored_ = true;
}

void Scheduler::score_chunk(Slot& slot) {
  Sequence& q = *slot.seq;
  try {
    slot.scored = score_prompt_chunk(*slot.model, q.prompt(), slot.scored, q.options().logprobs, q.prompt_logprobs_);
    if (slot.scored < q.prompt().size()) return;
    slot.scoring = false;
    q.prompt_scored_ = true;
    last_scored_ = ScoredPrompt{q.prompt(), q.options().logprobs, q.prompt_logprobs_};
    {
      std::lock_guard lock(mu_);
      ++stats_.prompts_scored;
    }
    if (q.options().max_tokens == 0) {
      slot.kept = slot.scored;  // as the prompt's chunks compute them: kept for the prompt cache
      return release(slot, {}, FinishReason::Length);
    }
    // The keys and values scoring computed are those of the prompt's chunks: only the last
    // chunk runs again, to draw the first token.
    const uint32_t chunk = slot.model->max_chunk();
    slot.gen->begin(q.prompt(), q.options(), reusable_prefix(q.prompt(), q.prompt(), q.prompt().size(), chunk));
  } catch (const std::exception& e) {
    release(slot, e.what());
  }
}

uint32_t Scheduler::cached_prompt_tokens(const Slot& slot) const {
  // A prompt scored here ran whole in this slot, though its generator skipped its first chunks.
  return slot.scored_here ? 0 : slot.gen->timings().prompt_tokens_cached;
}

uint32_t Scheduler::reusable(const Slot& slot, const Sequence& seq) const {
  if (!may_use_prompt_cache(seq)) return 0;
  return reusable_prefix(seq.prompt(), slot.tokens, kept_tokens(slot), slot.model->max_chunk());
}

const Scheduler::Slot* Scheduler::holder_of(const Sequence& seq, const Slot& target) const {
  if (!may_use_prompt_cache(seq) || seq.options().sampling.controls_on()) return nullptr;
  const std::vector<uint32_t>& p = seq.prompt();
  auto holds = [&](const Slot& s) {
    return s.logits_for == p.size() && kept_tokens(s) >= p.size() && s.tokens.size() >= p.size() &&
           std::equal(p.begin(), p.end(), s.tokens.begin());
  };
  if (holds(target)) return &target;
  for (const Slot& s : slots_)
    if (holds(s)) return &s;
  return nullptr;
}

std::vector<Scheduler::Slot*> Scheduler::first_logits_to_keep(std::span<Slot* const> slots) const {
  std::vector<Slot*> keep;
  if (!prompt_cache_) return keep;
  for (Slot* s : slots) {
    if (!s->seq || s->from_kept || s->gen->prefilling()) continue;  // failed, or keeps them already
    const auto& p = s->seq->prompt();
    if (std::any_of(keep.begin(), keep.end(), [&](const Slot* k) { return k->tokens == p; })) continue;
    keep.push_back(s);
  }
  return keep;
}

void Scheduler::keep_first_logits(std::span<Slot* const> keep) {
  std::vector<GptModel*> models;
  for (Slot* s : keep) models.push_back(s->model.get());
  try {
    batch_.keep_first_logits(models);
  } catch (const std::exception&) {
    return;  // nothing kept: those prompts run again when asked for
  }
  // Each slot's tokens begin with that prompt still (a sequence that finished keeps them).
  for (Slot* s : keep) s->logits_for = s->gen->timings().prompt_tokens;
}

Scheduler::Slot* Scheduler::slot_to_refill() {
  if (!prompt_cache_) return nullptr;  // nothing kept is ever reused: refilling would be wasted work
  for (Slot& s : slots_) {
    const uint32_t chunk = s.model->max_chunk();
    if (!s.seq && whole_chunks(s.kept, chunk) + chunk <= s.tokens.size()) return &s;
  }
  return nullptr;
}

void Scheduler::refill_chunk(Slot& slot) {
  const uint32_t chunk = slot.model->max_chunk();
  const uint32_t from = static_cast<uint32_t>(whole_chunks(slot.kept, chunk));  // a partial last chunk runs again whole
  try {
    // A prompt's last chunk that runs again whole may give its keys and values other last
    // bits than that chunk did: its kept logits no longer go with them.
    if (from < slot.logits_for) slot.logits_for = 0;
    slot.model->prefill(std::span<const uint32_t>(slot.tokens).subspan(from, chunk), from, false);
    slot.kept = from + chunk;
  } catch (const std::exception&) {
    slot.kept = 0;  // whatever the failed run left in the cache is kept for nothing
    slot.tokens.clear();
    slot.logits_for = 0;
  }
  std::lock_guard lock(mu_);
  ++stats_.cache_refill_chunks;
}

Scheduler::Slot* Scheduler::free_slot_for(const Sequence* seq) {
  Slot* best = nullptr;
  uint32_t best_kept = 0;
  for (Slot& s : slots_) {
    if (s.seq) continue;
    // One that holds the whole prompt with its first token's logits first, then the most
    // whole chunks.
    const uint32_t kept = !seq ? 0 : holder_of(*seq, s) == &s ? UINT32_MAX : reusable(s, *seq);
    if (!best || kept > best_kept || (kept == best_kept && s.released < best->released)) best = &s, best_kept = kept;
  }
  return best;
}

size_t Scheduler::prefill_round() {
  size_t handed = 0;
  uint32_t spent = 0, chunks = 0;
  // Last chunks that run together after the others (DecodeBatch groups them by the rows
  // that fit one graph); `distinct` of them run, the others being their twins.
  std::vector<Slot*> together;
  std::vector<const Generator*> distinct;
  for (;;) {
    Slot* s = next_to_prefill(together);
    if (!s && !together.empty()) {
      // Prompts queued while this burst runs join the round (the budget allowing), so
      // they wait for no decode step: requests that clients send together reach the queue
      // over a few milliseconds, as the HTTP threads read them (bench/PERFORMANCE.md,
      // "Batched decode").
      handed += prefill_together(together);
      together.clear();
      distinct.clear();
      continue;
    }
    if (!s) break;
    if (s->scoring) {
      if (s->seq->cancelled()) {
        release(*s, {}, FinishReason::Cancelled);
        continue;
      }
      const uint32_t n = std::min<uint32_t>(s->model->max_chunk(), s->seq->prompt().size() - s->scored);
      if (spent > 0 && spent + n > prefill_budget_) break;  // the next round's
      spent += n;
      ++chunks;
      score_chunk(*s);
      continue;
    }
    // An exact hit of the prompt cache runs no rows (sample_kept), so it costs no budget.
    const bool hit = s->from_kept && s->gen->last_chunk_next();
    const bool burst = hit || (s->gen->last_chunk_next() && DecodeBatch::burst_fits(s->gen->next_chunk_tokens()));
    const bool twin = hit || (burst && has_twin(*s->gen, distinct));
    const uint32_t n = twin ? 0 : s->gen->next_chunk_tokens();
    if (spent > 0 && spent + n > prefill_budget_) break;  // the next round's
    spent += n;
    chunks += !twin;
    if (burst) {
      together.push_back(s);
      if (!twin) distinct.push_back(s->gen.get());
      if (distinct.size() == kBurstPrompts) {  // these first tokens go out before the next burst runs
        handed += prefill_together(together);
        together.clear();
        distinct.clear();
      }
      continue;
    }
    try {
      if (s->gen->prefill_next()) {
        const std::vector<Slot*> keep = first_logits_to_keep({&s, 1});
        step(*s);  // the first token (sampled by the last chunk) goes out now
        keep_first_logits(keep);
        ++handed;
      }
    } catch (const std::exception& e) {
      release(*s, e.what());
    }
  }
  handed += prefill_together(together);  // those the budget cut short
  std::lock_guard lock(mu_);
  stats_.prefill_chunks += chunks;
  stats_.max_round_prefill_tokens = std::max(stats_.max_round_prefill_tokens, spent);
  return handed;
}

size_t Scheduler::prefill_together(std::span<Slot* const> together) {
  if (together.empty()) return 0;
  std::vector<Generator*> gens, kept;
  for (Slot* s : together) (s->from_kept ? kept : gens).push_back(s->gen.get());
  try {
    run_prompts_together(batch_, gens, kept);
  } catch (const std::exception& e) {
    for (Slot* s : together) release(*s, e.what());
    return 0;
  }
  {
    std::lock_guard lock(mu_);
    stats_.burst_prompts = batch_.burst_prompts();
    stats_.twin_prompts = batch_.twin_prompts();
    stats_.prompt_cache_hits += kept.size();
  }
  const std::vector<Slot*> keep = first_logits_to_keep(together);
  for (Slot* s : together) {
    s->from_kept = false;
    step(*s);  // the first tokens go out now
  }
  keep_first_logits(keep);  // after them: nothing runs on the device in between
  return together.size();
}

uint64_t Scheduler::step_all() {
  std::vector<Slot*> due;
  std::vector<GptModel*> rows;
  for (Slot& s : slots_)
    if (s.seq && !s.scoring) {  // a scoring slot's generator has not begun
      if (s.seq->cancelled()) s.gen->cancel();
      if (s.gen->decode_due()) due.push_back(&s), rows.push_back(s.model.get());
    }
  if (!rows.empty()) {
    const auto t0 = Clock::now();
    std::vector<uint32_t> next;
    try {
      // A step's rows live in the first sequence's activations, --prefill-chunk of them:
      // more slots than that decode in several steps.
      const size_t group = rows[0]->max_chunk();
      for (size_t at = 0; at < rows.size(); at += group) {
        const auto part = batch_.decode_next(std::span(rows).subspan(at, std::min(group, rows.size() - at)));
        next.insert(next.end(), part.begin(), part.end());
      }
    } catch (const std::exception& e) {
      for (Slot* s : due) release(*s, e.what());
      return 0;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t b = 0; b < due.size(); ++b) {
      try {
        due[b]->gen->decoded(next[b], seconds);  // reads the logits back where logprobs are asked for
      } catch (const std::exception& e) {
        release(*due[b], e.what());  // that sequence alone; an exception here would end the server
      }
    }
  }
  uint64_t made = 0;
  for (Slot& s : slots_) {
    if (!s.seq) continue;
    if (s.scoring) {
      if (s.seq->cancelled()) release(s, {}, FinishReason::Cancelled);  // its scores stop here
    } else if (!s.gen->prefilling() || s.seq->cancelled()) {
      step(s);  // hands out the token decoded above (or finishes a cancelled sequence)
      ++made;
    }
  }
  return made;
}

void Scheduler::admit(Slot& slot, std::shared_ptr<Sequence> seq) {
  // A cancelled sequence, or one with nothing to run (max_tokens 0, its scores taken or not
  // asked for: OpenAI's echo), finishes here, leaving the slot and what it keeps untouched.
  const bool idle = !seq->needs_prompt_scores() && seq->options().max_tokens == 0;
  if (seq->cancelled() || idle) {
    {
      std::lock_guard lock(mu_);
      --stats_.active;  // counted by next_queued()
      ++stats_.sequences_done;
      if (!seq->cancelled()) stats_.prompt_tokens += seq->prompt().size();
    }
    seq->finish(seq->cancelled() ? FinishReason::Cancelled : FinishReason::Length, {});
    return;
  }
  // Before anything runs over the slot's KV cache: what it keeps of the prompt, and what
  // another slot (running or free) keeps beyond that, to be copied.
  const Slot* source = nullptr;
  uint32_t reuse = reusable(slot, *seq);
  for (const Slot& s : slots_)
    if (&s != &slot && reusable(s, *seq) > reuse) source = &s, reuse = reusable(s, *seq);
  const Slot* holder = holder_of(*seq, slot);  // the whole prompt, with its first token's logits
  slot.seq = std::move(seq);
  slot.admitted = ++admissions_;
  slot.scoring = slot.scored_here = false;
  Sequence& q = *slot.seq;
  slot.kept = 0;
  slot.tokens = q.prompt();  // while it runs, its prompt chunks are kept for others (kept_tokens)
  slot.from_kept = holder != nullptr;
  if (holder != &slot) slot.logits_for = 0;
  {
    std::lock_guard lock(mu_);
    stats_.prompt_tokens += q.prompt().size();
  }
  try {
    if (holder && holder != &slot) {  // every position, and the logits (reuse's chunks among them)
      slot.model->copy_kept_prompt(*holder->model, static_cast<uint32_t>(q.prompt().size()));
      slot.logits_for = q.prompt().size();
    } else if (source) {
      slot.model->copy_prompt_prefix(*source->model, reuse);
    }
    slot.own_cached = holder == &slot ? static_cast<uint32_t>(q.prompt().size()) : holder || source ? 0 : reuse;
    slot.cache_counted = false;
    if (q.needs_prompt_scores()) {  // its chunks run in prefill_round(), the generator's after them
      slot.scoring = slot.scored_here = true;
      slot.scored = 0;
      return;
    }
    slot.gen->begin(q.prompt(), q.options(), reuse);  // its chunks run in prefill_round()
  } catch (const std::exception& e) {
    release(slot, e.what());
  }
}

void Scheduler::step(Slot& slot) {
  // Counted once the prompt has run, as the sequence's usage reports it (cached_prompt_tokens:
  // begin's reuse, none for a prompt scored in this slot, or the whole prompt when its first
  // token came from kept logits): a sequence cancelled before reports no usage, and is not
  // counted.
  if (!slot.cache_counted && !slot.gen->prefilling()) {
    slot.cache_counted = true;
    const uint32_t cached = cached_prompt_tokens(slot);
    std::lock_guard lock(mu_);
    stats_.prompt_tokens_cached += cached;
    stats_.prompt_tokens_copied += cached - std::min(cached, slot.own_cached);
  }
  try {
    if (slot.seq->cancelled()) slot.gen->cancel();
    GenerationStep s = slot.gen->next();
    if (s.token) {
      std::lock_guard lock(mu_);
      ++stats_.generated_tokens;
    }
    slot.seq->push(std::move(s));
    if (slot.gen->finished()) release(slot);
  } catch (const std::exception& e) {
    release(slot, e.what());
  }
}

void Scheduler::release(Slot& slot, std::string error, std::optional<FinishReason> why) {
  std::shared_ptr<Sequence> seq = std::move(slot.seq);
  slot.released = ++releases_;
  slot.scoring = false;
  // The prompt cache keeps the prompt chunks the generator ran (or reused), unless the sequence failed
  // or never reached the generator (score_chunk keeps those of a prompt scored alone).
  // Its copies cannot fail the release (the caller's handler would release an empty slot).
  if (prompt_cache_ && error.empty() && !why) {
    try {
      slot.tokens = seq->prompt();
      slot.kept = std::min<size_t>(slot.tokens.size(), slot.gen->prompt_tokens_in_cache());
      if (slot.kept == slot.tokens.size())  // the whole prompt ran: its reply follows it
        slot.tokens.insert(slot.tokens.end(), slot.gen->tokens().begin(), slot.gen->tokens().end());
    } catch (const std::bad_alloc&) {
      slot.tokens.clear();  // nothing kept: the next prompt runs whole
      slot.kept = 0;
      slot.logits_for = 0;
    }
  }
  {
    // Counted before the sequence says it finished, so that whoever saw it finish sees it
    // counted too.
    std::lock_guard lock(mu_);
    --stats_.active;
    ++stats_.sequences_done;
  }
  if (why) {
    seq->finish(*why, {});
  } else if (error.empty()) {
    GenerationTimings timings = slot.gen->timings();
    timings.prompt_tokens_cached = cached_prompt_tokens(slot);
    seq->finish(slot.gen->finish_reason(), timings);
  } else {
    seq->finish(FinishReason::Cancelled, {}, std::move(error));
  }
}

}  // namespace gptvk
