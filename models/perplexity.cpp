#include "models/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/error.hpp"

namespace gptvk {

namespace {

// -log softmax(logits)[target], in double.
double nll(const float* logits, uint32_t vocab, uint32_t target) {
  double m = logits[0];
  for (uint32_t i = 1; i < vocab; ++i) m = std::max(m, double(logits[i]));
  double sum = 0;
  for (uint32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - m);
  return std::log(sum) + m - double(logits[target]);
}

}  // namespace

PerplexityResult perplexity(GptModel& model, std::span<const uint32_t> ids, uint32_t context, uint32_t stride) {
  const ModelConfig& cfg = model.config();
  if (context < 2 || context > cfg.context_length)
    throw UsageError("--context must be between 2 and the model's context of " + std::to_string(cfg.context_length));
  if (stride < 1 || stride > context) throw UsageError("--stride must be between 1 and --context");
  if (ids.size() < 2) throw InputError("the text has fewer than 2 tokens");
  PerplexityResult r;
  double total = 0;
  size_t prev_end = 0;
  for (size_t begin = 0;; begin += stride) {
    size_t end = std::min<size_t>(begin + context, ids.size());
    auto logits = model.prefill(ids.subspan(begin, end - begin), 0, true);
    r.evaluated += end - begin;
    // Targets ids[max(begin + 1, prev_end) .. end), each predicted by the position before it.
    for (size_t t = std::max(begin + 1, prev_end); t < end; ++t) {
      total += nll(logits.data() + (t - 1 - begin) * cfg.vocab_size, cfg.vocab_size, ids[t]);
      ++r.scored;
    }
    prev_end = end;
    if (end == ids.size()) break;
  }
  r.perplexity = std::exp(total / double(r.scored));
  return r;
}

}  // namespace gptvk
