// The sampling controls, on the device: repetition, frequency and presence penalties over a
// window of the sequence's own tokens, logit bias, and min-p. They reshape the logits into
// a buffer of their own (the model's logits stay as they were, for log-probabilities) and
// the sampler (engine/ops/sample.hpp) then applies temperature, top-k and top-p to that.
// The full order, also in `gpt-vk generate --help` and the README:
//   1. penalties, for each distinct token t among the last repeat_last_n tokens of the
//      sequence (prompt and generated text; -1: all of it), with c = its count there:
//        repetition (CTRL, llama.cpp): logit / repeat_penalty if > 0, else * repeat_penalty
//        frequency and presence (OpenAI's formula, over the same window):
//          logit -= c * frequency_penalty + presence_penalty
//   2. logit bias: logit += bias[t]
//   3. min-p: drop tokens whose probability (at temperature 1) is below min_p times the
//      most probable one's, i.e. logit < max logit + ln(min_p)
//   4. temperature, top-k, top-p, draw (or argmax at temperature 0)
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
// history in `state` (steps 1-3 above). Does nothing when !p.controls_on().
void sampling_controls(Graph& g, View logits, SamplingState& state, uint32_t vocab, const SamplingParams& p,
                       const std::string& name = "sampling_controls");

}  // namespace gptvk::ops
