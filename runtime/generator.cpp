#include "runtime/generator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <iterator>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/parallel.hpp"

namespace gptvk {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "";
    case FinishReason::Length:
    case FinishReason::ContextFull: return "length";
    case FinishReason::EndOfText:
    case FinishReason::StopString: return "stop";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "";
}

void check_prompt_fits(size_t prompt_tokens, uint32_t context) {
  if (prompt_tokens >= context)
    throw InputError("the prompt is " + std::to_string(prompt_tokens) + " tokens; the model's context holds " +
                     std::to_string(context) + " including at least one generated token");
}

TokenLogprob log_softmax_top(std::span<const float> logits, uint32_t token, uint32_t k) {
  double m = -INFINITY;
  for (float x : logits) m = std::max(m, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - m);
  const double log_z = m + std::log(sum);
  TokenLogprob r;
  r.token = token;
  r.logprob = float(double(logits[token]) - log_z);
  k = std::min<uint32_t>(k, static_cast<uint32_t>(logits.size()));
  std::vector<uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t a, uint32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (uint32_t i = 0; i < k; ++i) r.top.emplace_back(order[i], float(double(logits[order[i]]) - log_z));
  return r;
}

uint32_t score_prompt_chunk(GptModel& model, std::span<const uint32_t> prompt, uint32_t from, uint32_t k,
                            std::vector<TokenLogprob>& scores) {
  const uint32_t end = static_cast<uint32_t>(std::min<size_t>(prompt.size(), size_t(from) + model.max_chunk()));
  const uint64_t V = model.config().vocab_size;
  const std::vector<float> logits = model.prefill(prompt.subspan(from, end - from), from, true);
  // Each row's log-softmax is a pass of exp over the vocabulary (13 M of them for a chunk of
  // 256 of GPT-2's rows), during which the device and every other stream wait: on the
  // host's cores, as perplexity's.
  const size_t rows = std::min<size_t>(end, prompt.size() - 1) - std::min<size_t>(from, prompt.size() - 1);
  std::vector<TokenLogprob> chunk(rows);
  std::exception_ptr failed;
  std::mutex failed_mu;
  parallel_for(rows, 16, [&](size_t b, size_t e) {
    try {
      for (size_t r = b; r < e; ++r)
        chunk[r] = log_softmax_top(std::span<const float>(logits).subspan(r * V, V), prompt[from + r + 1], k);
    } catch (...) {  // parallel_for's threads must not throw: the first failure goes to the caller
      std::lock_guard lock(failed_mu);
      if (!failed) failed = std::current_exception();
    }
  });
  if (failed) std::rethrow_exception(failed);
  scores.insert(scores.end(), std::make_move_iterator(chunk.begin()), std::make_move_iterator(chunk.end()));
  return end;
}

Generator::Generator(GptModel& model, const Tokenizer& tokenizer)
    : model_(model), tok_(tokenizer), end_ids_(tokenizer.end_ids().begin(), tokenizer.end_ids().end()) {}

void Generator::start(std::span<const uint32_t> prompt, const GenerationOptions& options) {
  begin(prompt, options);
  while (!prefill_next()) {
  }
}

void Generator::begin(std::span<const uint32_t> prompt, const GenerationOptions& options, uint32_t reuse) {
  ops::check_sampling_params(options.sampling);
  if (options.max_tokens == 0) throw UsageError("max_tokens must be at least 1");
  ops::check_logit_bias_ids(options.sampling, model_.config().vocab_size);
  const uint32_t context = model_.config().context_length;
  if (prompt.empty()) throw InputError("the prompt has no tokens");
  check_prompt_fits(prompt.size(), context);
  // Checked here, not only when a chunk runs: a bad prompt then fails alone, never a run of
  // several sequences' chunks it would have joined.
  check_token_ids(prompt, model_.config().vocab_size);
  opts_ = options;
  std::vector<std::string> stops;
  for (const std::string& s : options.stop) stops.push_back(tok_.stop_text(s));
  text_ = TextStream(std::move(stops), options.drop_leading_space);
  tokens_.clear();
  logprobs_.clear();
  timings_ = {};
  timings_.prompt_tokens = static_cast<uint32_t>(prompt.size());
  cancel_ = false;
  decode_due_ = false;
  reason_ = FinishReason::None;
  pending_logprob_.reset();
  model_.set_sampling(options.sampling);
  prompt_.assign(prompt.begin(), prompt.end());
  chunks_ = model_.prompt_chunks(prompt_.size());
  next_chunk_ = 0;
  prompt_kv_ = 0;
  if (reuse) {
    if (reuse >= prompt.size()) throw std::logic_error("Generator::begin: nothing of the prompt left to run");
    model_.reuse_prompt_prefix(reuse);
    while (chunks_[next_chunk_].first < reuse) ++next_chunk_;
    prompt_kv_ = timings_.prompt_tokens_cached = reuse;
  }
}

uint32_t Generator::next_chunk_tokens() const {
  if (!prefilling()) throw std::logic_error("Generator::next_chunk_tokens() while not prefilling");
  return chunks_[next_chunk_].second - chunks_[next_chunk_].first;
}

bool Generator::prefill_next() {
  if (!prefilling()) throw std::logic_error("Generator::prefill_next() while not prefilling");
  const auto [b, e] = chunks_[next_chunk_++];
  const auto t0 = Clock::now();
  if (prefilling()) {  // an earlier chunk: keys and values only
    model_.prefill(std::span<const uint32_t>(prompt_).subspan(b, e - b), b, false);
    timings_.prefill_s += seconds_since(t0);
    prompt_kv_ = e;
    return false;
  }
  const uint32_t token = model_.sample_after_prefill(prompt_, b);
  prompt_kv_ = e;
  end_prefill(token, seconds_since(t0));
  return true;
}

uint32_t reusable_prefix(std::span<const uint32_t> prompt, std::span<const uint32_t> cached, size_t kept, uint32_t chunk) {
  if (prompt.empty()) return 0;
  const size_t n = std::min({kept, cached.size(), prompt.size() - 1});
  const size_t same = static_cast<size_t>(std::mismatch(prompt.begin(), prompt.begin() + n, cached.begin()).first - prompt.begin());
  return static_cast<uint32_t>(same / chunk * chunk);
}

bool Generator::copy_prompt_chunks_from(const Generator& other) {
  if (!prefilling() || !other.prefilling() || &other == this) return false;
  const uint32_t whole = reusable_prefix(prompt_, other.prompt_, other.prompt_kv_, model_.max_chunk());
  if (whole <= chunks_[next_chunk_].first) return false;
  model_.copy_prompt_prefix(other.model_, whole);
  while (chunks_[next_chunk_].first < whole) ++next_chunk_;
  prompt_kv_ = timings_.prompt_tokens_cached = whole;
  return true;
}

namespace {
// Generators at their last chunk, as DecodeBatch takes them: models, prompts, chunk starts.
struct LastChunks {
  std::vector<Generator*> gens;
  std::vector<GptModel*> models;
  std::vector<std::span<const uint32_t>> prompts;
  std::vector<uint32_t> begins;
  void add(Generator* g) {
    gens.push_back(g);
    models.push_back(&g->model());
    prompts.push_back(g->prompt());
    begins.push_back(g->next_chunk_begin());
  }
};
}  // namespace

void run_prompts_together(DecodeBatch& batch, std::span<Generator* const> gens, std::span<Generator* const> kept) {
  if (!kept.empty()) {
    LastChunks hits;
    for (Generator* g : kept) hits.add(g);
    const auto t0 = Clock::now();
    const std::vector<uint32_t> first = batch.sample_kept(hits.models, hits.prompts, hits.begins);
    const double seconds = seconds_since(t0);
    for (size_t b = 0; b < kept.size(); ++b) kept[b]->prefilled_with(first[b], seconds, true);
  }
  LastChunks last;
  for (size_t i = 0; i < gens.size(); ++i) {
    Generator* g = gens[i];
    // Whole chunks that an earlier one here ran of the same tokens are copied, not run again.
    for (size_t j = 0; j < i; ++j) g->copy_prompt_chunks_from(*gens[j]);
    while (g->prefilling() && !g->last_chunk_next()) g->prefill_next();
    if (g->prefilling()) last.add(g);
  }
  if (last.gens.empty()) return;
  const auto t0 = Clock::now();
  const std::vector<uint32_t> first = batch.sample_after_prefill(last.models, last.prompts, last.begins);
  const double seconds = seconds_since(t0);
  for (size_t b = 0; b < last.gens.size(); ++b) last.gens[b]->prefilled_with(first[b], seconds);
}

uint32_t Generator::next_chunk_begin() const {
  if (!prefilling()) throw std::logic_error("Generator::next_chunk_begin() while not prefilling");
  return chunks_[next_chunk_].first;
}

void Generator::prefilled_with(uint32_t token, double seconds, bool from_kept) {
  if (!prefilling() || !last_chunk_next()) throw std::logic_error("Generator::prefilled_with() before the last chunk");
  prompt_kv_ = chunks_[next_chunk_++].second;
  if (from_kept) timings_.prompt_tokens_cached = prompt_kv_;
  end_prefill(token, seconds);
}

void Generator::end_prefill(uint32_t token, double seconds) {
  pending_ = token;
  timings_.prefill_s += seconds;
  if (opts_.logprobs) pending_logprob_ = logprob_of(pending_);
  prompt_.clear();
}

void Generator::decoded(uint32_t token, double seconds) {
  if (!decode_due()) throw std::logic_error("Generator::decoded() without a decode due");
  pending_ = token;
  timings_.decode_s += seconds;
  if (opts_.logprobs) pending_logprob_ = logprob_of(pending_);
  decode_due_ = false;
}

TokenLogprob Generator::logprob_of(uint32_t token) const {
  return log_softmax_top(model_.last_step_logits(), token, opts_.logprobs);
}

GenerationStep Generator::finish(FinishReason why, GenerationStep step) {
  reason_ = why;
  step.text += text_.flush();
  step.last = true;
  return step;
}

GenerationStep Generator::next() {
  if (finished()) throw std::logic_error("Generator::next() after the generation finished");
  GenerationStep step;
  if (cancel_) {
    next_chunk_ = chunks_.size();  // a prompt still prefilling is dropped
    prompt_.clear();
    return finish(FinishReason::Cancelled, std::move(step));
  }
  if (prefilling()) throw std::logic_error("Generator::next() before the prompt's last chunk ran");
  // The token handed out last time is decoded now, not then, so its text reached the caller
  // before this model step ran.
  if (decode_due_) {
    auto t0 = Clock::now();
    pending_ = model_.decode_next();
    timings_.decode_s += seconds_since(t0);
    if (opts_.logprobs) pending_logprob_ = logprob_of(pending_);
    decode_due_ = false;
  }
  const uint32_t token = pending_;
  if (opts_.stop_at_end_of_text && std::ranges::find(end_ids_, token) != end_ids_.end())
    return finish(FinishReason::EndOfText, std::move(step));
  step.token = token;
  step.logprob = std::move(pending_logprob_);
  pending_logprob_.reset();
  tokens_.push_back(token);
  if (step.logprob) logprobs_.push_back(*step.logprob);
  timings_.generated_tokens = static_cast<uint32_t>(tokens_.size());
  step.text = text_.feed(tok_.token_bytes(token));
  if (text_.stopped()) return finish(FinishReason::StopString, std::move(step));
  if (tokens_.size() >= opts_.max_tokens) return finish(FinishReason::Length, std::move(step));
  // The context rule (cli/README.md, "Context"): prompt + generated <= context.
  if (timings_.prompt_tokens + tokens_.size() >= model_.config().context_length)
    return finish(FinishReason::ContextFull, std::move(step));
  decode_due_ = true;
  return step;
}

}  // namespace gptvk
