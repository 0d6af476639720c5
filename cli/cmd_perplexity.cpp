// `gpt-vk perplexity`: token-level perplexity of a text file with a sliding window, as
// peers compute it: windows of --context tokens advance by --stride, and each window
// scores only the tokens no earlier window scored, so every token after the first is
// scored once, with up to context - stride tokens of history.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "cli/commands.hpp"
#include "cli/model_session.hpp"
#include "engine/error.hpp"

namespace gptvk::cli {

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

Action add_perplexity(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string file;
    uint32_t context = 0, stride = 0;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file (sliding window)");
  add_model_flags(cmd, f->model);
  cmd->add_option("--file", f->file, "UTF-8 text file")->required();
  cmd->add_option("--context", f->context, "window length in tokens (default: the model's context)");
  cmd->add_option("--stride", f->stride, "window step in tokens (default: half the window)");
  return [&common, f] {
    std::ifstream in(f->file, std::ios::binary);
    if (!in) throw InputError("cannot read " + f->file);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto s = open_model(common, f->model);
    const auto& cfg = s.cfg;
    uint32_t N = f->context ? f->context : cfg.context_length;
    if (N < 2 || N > cfg.context_length)
      throw UsageError("--context must be between 2 and the model's context of " + std::to_string(cfg.context_length));
    uint32_t S = f->stride ? f->stride : std::max(1u, N / 2);
    if (S > N) throw UsageError("--stride must not exceed --context");
    Tokenizer tok = load_tokenizer(cfg);
    auto ids = tok.encode(text);
    if (ids.size() < 2) throw InputError(f->file + " has fewer than 2 tokens");

    auto t0 = std::chrono::steady_clock::now();
    double total = 0;
    uint64_t scored = 0, evaluated = 0;
    size_t prev_end = 0;
    for (size_t begin = 0;; begin += S) {
      size_t end = std::min(begin + N, ids.size());
      std::span<const uint32_t> window(ids.data() + begin, end - begin);
      auto logits = s.model->prefill(window, 0, true);
      evaluated += window.size();
      // Targets ids[max(begin + 1, prev_end) .. end): each predicted by the position before it.
      for (size_t t = std::max(begin + 1, prev_end); t < end; ++t) {
        total += nll(logits.data() + (t - 1 - begin) * cfg.vocab_size, cfg.vocab_size, ids[t]);
        ++scored;
      }
      prev_end = end;
      if (end == ids.size()) break;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double ppl = std::exp(total / double(scored));
    std::fprintf(stderr, "gpt-vk: %llu tokens scored in windows of %u, stride %u: %.1f tok/s evaluated\n",
                 static_cast<unsigned long long>(scored), N, S, evaluated / secs);
    std::printf("perplexity=%.4f tokens=%llu tok_s=%.1f\n", ppl, static_cast<unsigned long long>(scored),
                evaluated / secs);
    return 0;
  };
}

}  // namespace gptvk::cli
