// Sliding-window perplexity, as peers compute it: windows of `context` tokens advance by
// `stride`, and each window scores only targets no earlier window scored, so every token
// after the first is scored once with up to context - stride tokens of history.
#pragma once
#include <cstdint>
#include <span>

#include "models/gpt_model.hpp"

namespace gptvk {

struct PerplexityResult {
  double perplexity = 0;
  uint64_t scored = 0;     // targets scored
  uint64_t evaluated = 0;  // tokens run through the model (windows overlap)
};

// Throws UsageError for a context outside [2, model context] or a stride outside [1, context].
PerplexityResult perplexity(GptModel& model, std::span<const uint32_t> ids, uint32_t context, uint32_t stride);

}  // namespace gptvk
