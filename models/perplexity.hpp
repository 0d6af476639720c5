// Sliding-window scoring, as peers compute perplexity: windows of `context` tokens start at
// 0, stride, 2 * stride, ...; the last one ends at the text's end. Target t (the token at
// index t, predicted from the tokens before it in the window) is scored in the first window
// that holds both t and t - 1 with t not scored before, so:
//   - token 0 is never scored (nothing predicts it; where the model file asks for a bos
//     token before every text, token 0 is that and the text's first token is scored);
//   - with stride < context every other token is scored exactly once, with up to
//     context - stride tokens of history beyond the first window;
//   - with stride == context the first token of every window after the first is skipped
//     too (its predecessor lies in the previous window): the bundled model's 8944 held-out
//     tokens at context 64, stride 64 make 140 windows and score 8944 - 140 = 8804.
// `perplexity` and `gpt-vk score` share this loop, so their numbers agree exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "models/gpt_model.hpp"

namespace gptvk {

struct ScoredToken {
  size_t index = 0;     // position in the text's ids
  uint32_t id = 0;
  double logprob = 0;   // natural log of the model's probability of id there
  uint32_t rank = 0;    // 1 + the number of tokens with a strictly larger logit (1: the model's first choice)
};

struct PerplexityResult {
  double perplexity = 0;
  double perplexity_se = 0;  // standard error of the estimate: perplexity * SE(mean NLL), as llama-perplexity prints
  double mean_logprob = 0;
  uint64_t scored = 0;     // targets scored
  uint64_t evaluated = 0;  // tokens run through the model (windows overlap)
  bool stopped = false;    // on_window stopped it early: the numbers cover the windows so far
};

// Throws UsageError for a context outside [2, model context] or a stride outside [1, context],
// InputError for fewer than 2 ids. Calls `on_token` for every scored target in order, and
// `on_window(evaluated_so_far, total_to_evaluate)` after each window (either may be empty);
// on_window returning false stops the run there (Ctrl-C), with the result so far.
PerplexityResult score_windows(GptModel& model, std::span<const uint32_t> ids, uint32_t context, uint32_t stride,
                               const std::function<void(const ScoredToken&)>& on_token = {},
                               const std::function<bool(uint64_t, uint64_t)>& on_window = {});

inline PerplexityResult perplexity(GptModel& model, std::span<const uint32_t> ids, uint32_t context, uint32_t stride) {
  return score_windows(model, ids, context, stride);
}

}  // namespace gptvk
