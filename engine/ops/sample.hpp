// Token sampling on the device: the next token is picked from the logits by one dispatch and
// only its id (4 bytes) ever needs to reach the host. shaders/sample.comp says how; the CPU
// reference with the same semantics is tests/reference/sample.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/graph.hpp"

namespace gptvk::ops {

// Semantics, in order:
//   sampling controls (engine/ops/sample_controls.hpp: logit bias -> repetition, frequency
//   and presence penalties) -> logits / temperature -> top-k -> softmax -> top-p -> min-p ->
//   renormalise -> inverse CDF in id order at u = Philox4x32-10(key = seed, counter = step_rng).
// Greedy (temperature 0) takes the argmax after the controls (min-p cannot change it).
// The filters are thresholds on the logits' order, and ties at a threshold are kept: top-k
// keeps every token whose logit is >= the k-th largest logit (so more than k on a tie);
// top-p keeps every token whose probability is >= that of the last token of the nucleus
// (the most probable tokens of top-k's survivors, taken in order, until their mass first
// reaches top_p); min-p keeps every token whose logit is >= the largest + ln(min_p)
// (probability at temperature 1). A token is drawn only if all three keep it.
struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy (argmax, ties -> lowest id); must be >= 0
  uint32_t top_k = 0;        // 0 = off (as is any k >= vocab)
  float top_p = 1.0f;        // 1 = off; keep the smallest set of most probable tokens whose mass >= top_p; in (0, 1]
  uint64_t seed = 0;
  // The sampling controls (engine/ops/sample_controls.hpp); these defaults leave them off.
  float min_p = 0.0f;               // in [0, 1]; 0 = off
  float repeat_penalty = 1.0f;      // > 0; 1 = off
  int32_t repeat_last_n = 64;       // the penalties' window: last N tokens; 0 = off, -1 = the whole sequence
  float frequency_penalty = 0.0f;   // per occurrence in the window
  float presence_penalty = 0.0f;    // once for any occurrence in the window
  std::vector<std::pair<uint32_t, float>> logit_bias;  // token id -> added to its logit (repeats add up)

  bool penalties_on() const {
    return repeat_last_n != 0 && (repeat_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f);
  }
  // Greedy ignores min-p (the most probable token always passes it), so greedy with min-p
  // keeps the plain argmax paths: the pick after the LM head, batched rows.
  bool controls_on() const { return rewrites_logits() || (min_p > 0.0f && temperature > 0.0f); }
  // The controls that rewrite the logits before the sampler (bias and penalties, which read
  // the sequence's history); min-p is a stage of the sampler itself.
  bool rewrites_logits() const { return penalties_on() || !logit_bias.empty(); }
};

// Throws UsageError on a negative or non-finite temperature, a top_p outside (0, 1], a min_p
// outside [0, 1], a repeat_penalty that is not a finite number > 0, a repeat_last_n below -1,
// or a non-finite penalty or bias.
void check_sampling_params(const SamplingParams& p);
// Throws UsageError when a logit bias names a token id at or past `vocab`.
void check_logit_bias_ids(const SamplingParams& p, uint32_t vocab);

// Picks the next token from logits [vocab] (f32, finite; -inf works as a mask unless every
// logit is -inf; NaN and +inf are not supported): writes it to ids[0] and advances the step
// buffer (engine/ops/step.hpp) by pos += 1, rng += 1, so a recorded decode graph can replay:
// the next step embeds ids[0] at the new position and draws with the next counter. `scratch`
// is a device buffer of at least sample_scratch_bytes(vocab) bytes. vocab < 2^24.
// With `state` (required when p.rewrites_logits()), the bias and penalties run first, on the
// sequence's history there, and the token is appended to that history.
class SamplingState;
void sample(Graph& g, View logits, View ids, View step, View scratch, uint32_t vocab, const SamplingParams& p,
            const std::string& name = "sample", SamplingState* state = nullptr);
uint64_t sample_scratch_bytes(uint32_t vocab);
// How many rows' scratch one storage binding of this device holds (at least 1): the most
// draws of different sequences one sampler dispatch makes.
uint32_t sampler_rows_per_binding(const vk::Context& ctx, uint32_t vocab);

// `count` independent draws from the same logits in one dispatch (one workgroup each): draw j
// uses counter step_rng + j and goes to ids[j]; the step buffer is only read. Gives exactly
// the token sample() would give with step_rng + j (min-p included; not the bias or
// penalties, which need a sequence's state). The distribution tests draw with it
// (thousands of draws in one dispatch); no product path does. `scratch` holds
// count * sample_scratch_bytes(vocab) bytes; count <= 65535.
void sample_many(Graph& g, View logits, View ids, View step, View scratch, uint32_t vocab, uint32_t count,
                 const SamplingParams& p, const std::string& name = "sample_many");

// One row's sampling parameters as sample_rows() reads them from its table (std430, 32
// bytes a row; shaders/sample.comp's RowParams). rng_step is the Philox counter the row
// draws with: the row's token is the one sample() gives with its step buffer's rng_step.
struct SampleRow {
  float temperature;
  uint32_t top_k;
  float top_p;
  uint32_t seed_lo, seed_hi;
  uint32_t rng_step;
  // 0: row b draws from logits row b; r + 1: from row r, which b's row then need not hold
  // (a twin sharing another row's prompt, models/decode_batch.hpp).
  uint32_t same_as;
  uint32_t pad1;
};
static_assert(sizeof(SampleRow) == 32, "shaders/sample.comp reads the table as 32-byte rows");

// The table row for `p` drawing with counter rng_step. Throws UsageError on bad parameters
// (check_sampling_params) and std::logic_error when p.controls_on(): sample_rows() has no
// sampling controls (penalties, logit bias, min-p); such a row needs its own sample().
SampleRow sample_row(const SamplingParams& p, uint32_t rng_step);

// The sampler stages `p` uses on a vocabulary of `vocab` (FILTERS in shaders/sample.comp:
// bit 0 sampling, i.e. temperature > 0; bit 1 top-k; bit 2 top-p; bit 3 min-p). sample()
// compiles its pipeline for exactly these; sample_rows() for the union (bitwise or) of its
// rows', which never include min-p (sample_row() refuses it).
uint32_t sampler_filters(const SamplingParams& p, uint32_t vocab);

// Row b of logits [rows][vocab] (row b at b * vocab floats; or the row table[b].same_as
// names) is sampled with table[b] (a SampleRow) into ids[b], one workgroup a row, in one
// dispatch. Nothing else is written: no step buffer, no history. Each row's token is
// exactly the one sample() gives for that row's logits, parameters and rng_step; a greedy
// row takes the argmax and a row whose top-k or top-p is off skips that filter whatever
// the other rows use. `filters` must
// hold every row's sampler_filters (their union: one pipeline for the mix; a table with a
// stage outside it is not detected and samples wrongly). Not supported: rows whose
// parameters use the sampling controls (sample_row() refuses them; give such a row its own
// sample() with a SamplingState). `scratch` holds rows * sample_scratch_bytes(vocab)
// bytes; rows <= 65535 and rows * sample_scratch_bytes(vocab) < 16 GiB (32-bit word indices).
void sample_rows(Graph& g, View logits, uint32_t rows, View table, View ids, View scratch, uint32_t vocab,
                 uint32_t filters, const std::string& name = "sample_rows");

// Starts one draw with parameters `p` on scratch buffers of its own and returns at once, so
// that the sampler's pipeline for `p` is ready before the model first needs it. lavapipe
// JIT-compiles a pipeline at its first dispatch, on its queue thread: the sampler with top-k
// or top-p is a large part of a cold start, which this overlaps with the weight loading. The
// destructor waits for the draw. Throws what sample() would on bad parameters.
class SamplerWarmUp {
 public:
  SamplerWarmUp(vk::Context& ctx, uint32_t vocab, const SamplingParams& p);
  ~SamplerWarmUp();
  SamplerWarmUp(const SamplerWarmUp&) = delete;
  SamplerWarmUp& operator=(const SamplerWarmUp&) = delete;

 private:
  vk::Buffer logits_, ids_, step_, scratch_;
  std::unique_ptr<SamplingState> state_;
  std::unique_ptr<Graph> graph_;  // declared last: destroyed (waited for) before the buffers
};

}  // namespace gptvk::ops
