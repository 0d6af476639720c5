// The sampling controls, on the device: logit bias, then repetition, frequency and presence
// penalties over a window of the sequence's own tokens, and min-p. The bias and penalties
// rewrite the logits into a buffer of their own (the model's logits stay as they were, for
// log-probabilities); min-p is a stage of the sampler (engine/ops/sample.hpp), after top-p.
// The full order, also in `gpt-vk generate --help` and the README:
//   1. logit bias: x = logit + bias[t]
//   2. penalties on that x, for each distinct token t among the last repeat_last_n tokens
//      of the sequence (prompt and generated text; -1: all of it), with c = its count there:
//        repetition (CTRL, llama.cpp): x / repeat_penalty if x > 0, else x * repeat_penalty
//        frequency and presence (OpenAI's formula, over the same window):
//          x -= c * frequency_penalty + presence_penalty
//      (each result held within the float range: a bias or penalty that would overflow
//      gives the largest float, which keeps the order it asked for)
//   3. temperature, top-k, top-p: the nucleus of the top-k survivors' distribution
//   4. min-p: of what top-k and top-p keep, drop the tokens whose probability at
//      temperature 1 is below min_p times the most probable one's, i.e. whose x <
//      max x + ln(min_p)
//   5. draw from what is left, renormalised (or argmax at temperature 0, which min-p
//      cannot change)
// This is the order of Hugging Face transformers' generate() and llama.cpp's default sampler
// chain: the bias is the caller's edit of the model's logits, which the penalties then
// scale, and top-p measures its nucleus before min-p cuts anything (min-p's threshold is
// relative to the most probable token, which top-p always keeps, so the two are then an
// intersection). min-p at temperature 1 is llama.cpp's choice.
// The history lives on the device: the host writes the prompt once, the sampler appends each
// token it picks, so a decode step still sends nothing but a submit and returns one id.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/graph.hpp"
#include "engine/ops/sample.hpp"
#include "engine/vk/buffer.hpp"

namespace gptvk::ops {

// One sequence's device state for the controls: its token history (up to `capacity`
// tokens), the window's counts and the controlled logits.
class SamplingState {
 public:
  SamplingState(vk::Context& ctx, uint32_t vocab, uint32_t capacity);
  // Starts the history over with these tokens (e.g. the prompt). At most capacity.
  void reset(std::span<const uint32_t> tokens);
  // Appends a token sampled outside sample() (ops::sample_rows), as sample() appends its own;
  // a full history stays as it is.
  void append(uint32_t token);
  // The history as it is now on the device (the prompt and every token sampled since).
  std::vector<uint32_t> tokens() const;
  uint32_t vocab() const { return vocab_; }

  View history() { return whole(history_); }
  View counts() { return whole(counts_); }
  View controlled() { return whole(controlled_); }
  // The dense bias [vocab] for `p` (written now: graphs recorded with this state read it).
  View bias_for(const SamplingParams& p);

 private:
  vk::Context& ctx_;
  uint32_t vocab_, capacity_;
  vk::Buffer history_;     // host-visible: [0] = count, [1 + i] = token i
  vk::Buffer counts_;      // [vocab] uint, zero between dispatches
  vk::Buffer controlled_;  // [vocab] float: the logits after the controls
  vk::Buffer bias_;        // host-visible [vocab] float, made on first use
};

// Writes the controlled logits of `logits` [vocab] to state.controlled(), reading the
// history in `state` (steps 1-2 above). Does nothing when !p.rewrites_logits() (min-p alone
// is the sampler's).
void sampling_controls(Graph& g, View logits, SamplingState& state, uint32_t vocab, const SamplingParams& p,
                       const std::string& name = "sampling_controls");

}  // namespace gptvk::ops
