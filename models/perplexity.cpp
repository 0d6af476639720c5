#include "models/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/error.hpp"
#include "engine/parallel.hpp"

namespace gptvk {

namespace {

// log softmax(logits)[target] in double, and the target's rank.
ScoredToken score(const float* logits, uint32_t vocab, uint32_t target) {
  double m = logits[0];
  for (uint32_t i = 1; i < vocab; ++i) m = std::max(m, double(logits[i]));
  double sum = 0;
  uint32_t above = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    sum += std::exp(double(logits[i]) - m);
    above += logits[i] > logits[target];
  }
  ScoredToken s;
  s.id = target;
  s.logprob = double(logits[target]) - m - std::log(sum);
  s.rank = above + 1;
  return s;
}

// Tokens the windows run through the model in all (for progress).
uint64_t tokens_to_evaluate(size_t n, uint32_t context, uint32_t stride) {
  uint64_t total = 0;
  for (size_t begin = 0;; begin += stride) {
    size_t end = std::min<size_t>(begin + context, n);
    total += end - begin;
    if (end == n) return total;
  }
}

}  // namespace

PerplexityResult score_windows(GptModel& model, std::span<const uint32_t> ids, uint32_t context, uint32_t stride,
                               const std::function<void(const ScoredToken&)>& on_token,
                               const std::function<bool(uint64_t, uint64_t)>& on_window) {
  const ModelConfig& cfg = model.config();
  if (cfg.context_length < 2)  // the model's doing, not the flag's: bad input
    throw InputError("the model's context of " + std::to_string(cfg.context_length) +
                     " token is too short to score a text (a window needs 2 tokens)");
  if (context < 2 || context > cfg.context_length)
    throw UsageError("--context must be between 2 and the model's context of " + std::to_string(cfg.context_length));
  if (stride < 1 || stride > context) throw UsageError("--stride must be between 1 and --context");
  if (ids.size() < 2) throw InputError("the text has fewer than 2 tokens");
  const uint64_t total_tokens = tokens_to_evaluate(ids.size(), context, stride);
  PerplexityResult r;
  double sum = 0, sum_sq = 0;  // of the negative log-likelihoods
  size_t prev_end = 0;
  for (size_t begin = 0;; begin += stride) {
    size_t end = std::min<size_t>(begin + context, ids.size());
    // Targets ids[max(begin + 1, prev_end) .. end), each predicted by the position before it:
    // only those positions' logits are computed.
    const size_t first = std::max(begin + 1, prev_end);
    auto logits = model.prefill_logits_from(ids.subspan(begin, end - begin), 0, first - 1 - begin);
    r.evaluated += end - begin;
    // Each target's log-softmax (a pass of exp over the vocabulary) on the host's cores; the
    // sums then add up in target order, as one thread would.
    std::vector<ScoredToken> scored(end - first);
    parallel_for(scored.size(), 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) scored[i] = score(logits.data() + i * cfg.vocab_size, cfg.vocab_size, ids[first + i]);
    });
    for (size_t t = first; t < end; ++t) {
      ScoredToken& s = scored[t - first];
      s.index = t;
      sum -= s.logprob;
      sum_sq += s.logprob * s.logprob;
      ++r.scored;
      if (on_token) on_token(s);
    }
    prev_end = end;
    const bool go_on = !on_window || on_window(r.evaluated, total_tokens);
    if (end == ids.size()) break;
    if (!go_on) {
      r.stopped = true;
      break;
    }
  }
  const double n = double(r.scored), mean = sum / n;
  r.mean_logprob = -mean;
  r.perplexity = std::exp(mean);
  // Standard error of the mean NLL (sample variance), carried to the perplexity by the delta method.
  // One token gives no spread to estimate: nan, not a standard error of 0.
  const double var = n > 1 ? std::max(0.0, (sum_sq / n - mean * mean) * n / (n - 1)) : std::nan("");
  r.perplexity_se = r.perplexity * std::sqrt(var / n);
  return r;
}

}  // namespace gptvk
