// One sequence's generation over a GptModel: the prompt, the sampling parameters and seed,
// the stop conditions (max tokens, <|endoftext|> or the file's eos, stop strings, a full context), the text
// released so far, per-token log-probabilities on request, and timings. Tokens come one
// next() call at a time, so a caller can stream them (the CLI prints each piece; the server
// sends it) and stop early with cancel().
//
//   Generator gen(model, tokenizer);
//   gen.start(prompt_ids, options);                 // prefill + the first token
//   while (!gen.finished()) std::cout << gen.next().text;
//   gen.finish_reason(); gen.timings(); gen.tokens();
//
// The model holds one sequence: starting a generator (re)starts the model's sequence at
// position 0, so one model serves one running generator at a time.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/sample.hpp"
#include "models/decode_batch.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "runtime/text_stream.hpp"

namespace gptvk {

enum class FinishReason {
  None,         // still running
  Length,       // max_tokens generated
  EndOfText,    // the model sampled <|endoftext|> or the model file's eos (not part of the text or tokens)
  StopString,   // a stop string appeared (the text ends before it)
  ContextFull,  // the model's context is full
  Cancelled,    // cancel() was called
};
// OpenAI's words: "stop" (end of text, stop string), "length" (max tokens, full context),
// "cancelled"; "" while running.
const char* finish_reason_name(FinishReason r);

struct GenerationOptions {
  ops::SamplingParams sampling;  // temperature, top-k, top-p, min-p, penalties, logit bias, seed
  uint32_t max_tokens = 100;     // >= 1
  std::vector<std::string> stop;  // stop strings (bytes); the first occurrence ends the text
  bool drop_leading_space = false;  // the text leaves out a space it begins with (TextStream)
  bool stop_at_end_of_text = true;
  // With K > 0, each step's logits are downloaded (vocab floats) and every token gets its
  // log-probability and its K most probable alternatives: log-softmax of the model's raw
  // logits, before penalties, bias, temperature and filters.
  uint32_t logprobs = 0;
};

struct TokenLogprob {
  uint32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<uint32_t, float>> top;  // K best (id, logprob), most probable first
};

struct GenerationStep {
  std::optional<uint32_t> token;       // the token this step generated; none for an end id or cancel
  std::string text;                    // the text final now (may be empty: held back, or after a stop)
  std::optional<TokenLogprob> logprob;  // with GenerationOptions::logprobs
  bool last = false;                   // finished after this step
};

struct GenerationTimings {
  uint32_t prompt_tokens = 0, generated_tokens = 0;
  uint32_t prompt_tokens_cached = 0;  // of prompt_tokens, those whose keys and values were kept (begin's reuse)
  double prefill_s = 0;  // prompt + first token
  double decode_s = 0;   // every later token
  double prefill_tok_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
  // Tokens after the first per second of decoding.
  double decode_tok_s() const { return generated_tokens > 1 && decode_s > 0 ? (generated_tokens - 1) / decode_s : 0; }
};

class Generator {
 public:
  // Both must outlive the generator.
  Generator(GptModel& model, const Tokenizer& tokenizer);

  // Checks the options (UsageError: bad sampling parameters, a bias for a token outside the
  // vocabulary, max_tokens 0) and the prompt (InputError: empty, or no room for one
  // generated token in the context), sets the model's sampling parameters, prefills the
  // prompt at position 0 and samples the first token.
  void start(std::span<const uint32_t> prompt, const GenerationOptions& options);
  // start() in steps, so that a caller can run other work between the prompt's chunks (a
  // scheduler's decode steps for other sequences): begin() checks and sets up as start()
  // does without running the model; each prefill_next() runs the prompt's next chunk
  // (GptModel::prompt_chunks, of next_chunk_tokens() tokens) and returns true after the last
  // one, which samples the first token. Same results as start().
  // With `reuse` (a whole number of the model's chunks, fewer than the prompt's tokens), the
  // model's KV cache already holds the first `reuse` tokens of this prompt from the
  // prompt it ran before (GptModel::reuse_prompt_prefix): their chunks do not run again.
  void begin(std::span<const uint32_t> prompt, const GenerationOptions& options, uint32_t reuse = 0);
  bool prefill_next();
  bool prefilling() const { return next_chunk_ < chunks_.size(); }
  uint32_t next_chunk_tokens() const;
  // The prompt's last chunk run together with other sequences' (DecodeBatch::
  // sample_after_prefill over this generator's model, with prompt() and the tokens before
  // that chunk, next_chunk_begin()) instead of by prefill_next(): when last_chunk_next(),
  // hand over the first token that run sampled and the time it took. Same results.
  bool last_chunk_next() const { return next_chunk_ + 1 == chunks_.size(); }
  std::span<const uint32_t> prompt() const { return prompt_; }
  uint32_t next_chunk_begin() const;
  // `from_kept`: drawn from the logits the model kept for this prompt (DecodeBatch::
  // sample_kept), so the whole prompt counts as cached.
  void prefilled_with(uint32_t token, double seconds, bool from_kept = false);
  // Between begin() and the last chunk: where `other` (begun over a model of the same
  // weights and chunk size, also still prefilling) has run whole chunks of the same tokens
  // as this prompt's next ones, copies their keys and values (GptModel::copy_prompt_prefix)
  // and skips those chunks, counted as cached. Same results. Returns whether it copied.
  bool copy_prompt_chunks_from(const Generator& other);
  // How many of the last begun prompt's first tokens have their keys and values in the
  // model's KV cache from that prompt's chunks (those reused and those that ran since), to
  // be reused by a later prompt that starts with them.
  uint32_t prompt_tokens_in_cache() const { return prompt_kv_; }
  // The next token and the text it makes final. The step with `last` set carries the rest of
  // the text. Throws std::logic_error when finished (or not started).
  GenerationStep next();
  // Whether the next next() runs a model step first (the token handed out last is not yet
  // decoded). A caller that decodes several sequences at once (models/decode_batch.hpp)
  // does that step itself and hands its token over with decoded() before calling next().
  bool decode_due() const { return decode_due_ && !cancel_ && !finished(); }
  // The token the model's decode step sampled outside this generator, which took `seconds`
  // (counted as decode time); next() then hands it out without running the model.
  void decoded(uint32_t token, double seconds);
  // The next next() ends generation (FinishReason::Cancelled) without running the model.
  void cancel() { cancel_ = true; }

  GptModel& model() const { return model_; }
  bool finished() const { return reason_ != FinishReason::None; }
  FinishReason finish_reason() const { return reason_; }
  // Every generated token (the one that completed a stop string included; not an end id).
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  // The text released so far; when finished, the whole continuation (up to a stop string).
  const std::string& text() const { return text_.released(); }
  const std::vector<TokenLogprob>& logprobs() const { return logprobs_; }
  const GenerationTimings& timings() const { return timings_; }

 private:
  TokenLogprob logprob_of(uint32_t token) const;
  void end_prefill(uint32_t token, double seconds);  // after the last chunk sampled `token`
  GenerationStep finish(FinishReason why, GenerationStep step);

  GptModel& model_;
  const Tokenizer& tok_;
  GenerationOptions opts_;
  std::vector<uint32_t> end_ids_;  // the tokenizer's: <|endoftext|> and the model file's eos
  TextStream text_;
  std::vector<uint32_t> tokens_;
  std::vector<TokenLogprob> logprobs_;
  GenerationTimings timings_;
  std::vector<uint32_t> prompt_;  // while prefilling
  std::vector<std::pair<uint32_t, uint32_t>> chunks_;  // the prompt's chunks; next_chunk_ runs next
  size_t next_chunk_ = 0;
  uint32_t prompt_kv_ = 0;  // prompt_tokens_in_cache()
  uint32_t pending_ = 0;  // sampled, not yet handed out
  std::optional<TokenLogprob> pending_logprob_;
  FinishReason reason_ = FinishReason::Cancelled;  // not started counts as finished
  bool cancel_ = false;
  bool decode_due_ = false;  // the pending token was handed out: the next step decodes first
};

// Runs the prompts of generators begun (begin()) over models that share weights: each one's
// chunks before its last (those an earlier one ran of the same tokens copied from it:
// copy_prompt_chunks_from), then every last chunk together in bursts (DecodeBatch::
// sample_after_prefill), handing each generator its first token; the time of its burst
// counts as its prefill. The same results as each one's prefill_next() calls.
// `kept`: generators at their last chunk whose model holds their whole prompt's keys and
// values and kept its first-token logits (a prompt cache's exact hits): they draw from
// those (DecodeBatch::sample_kept), first, running nothing.
void run_prompts_together(DecodeBatch& batch, std::span<Generator* const> gens, std::span<Generator* const> kept = {});

// How many of `prompt`'s first tokens a KV cache can give that holds the first `kept` of
// `cached` as a prompt's chunks of `chunk` tokens computed them: their common start, in
// whole chunks (so the rest runs in the chunks it would have alone: the same results),
// leaving the prompt's last token to run, as it samples the first token.
uint32_t reusable_prefix(std::span<const uint32_t> prompt, std::span<const uint32_t> cached, size_t kept, uint32_t chunk);

// InputError unless a prompt of `prompt_tokens` leaves room for one generated token in `context`.
void check_prompt_fits(size_t prompt_tokens, uint32_t context);

// Log-softmax of `logits` at `token` and the K largest entries (ties: lower id first), in double.
TokenLogprob log_softmax_top(std::span<const float> logits, uint32_t token, uint32_t k);

// Runs the chunk of `prompt` from `from` (a multiple of model.max_chunk()) at its positions,
// with every row's logits, and appends the scores (log_softmax_top, k alternatives) of the
// prompt tokens its rows predict: the prompt's last row predicts a generated token, not
// scored. Returns the end of the chunk. The keys and values it leaves are those of the
// prompt's chunks (GptModel::prompt_chunks), as a generator runs them.
uint32_t score_prompt_chunk(GptModel& model, std::span<const uint32_t> prompt, uint32_t from, uint32_t k,
                            std::vector<TokenLogprob>& scores);

}  // namespace gptvk
