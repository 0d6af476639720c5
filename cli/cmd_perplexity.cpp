// `gpt-vk perplexity`: token-level perplexity of a text file with a sliding window
// (models/perplexity.hpp); prints the value and the tokens/s evaluated.
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/model_rules.hpp"
#include "cli/model_session.hpp"
#include "cli/output.hpp"
#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/perplexity.hpp"

namespace gptvk::cli {

Action add_perplexity(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string file;
    uint32_t context = 0, stride = 0;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "perplexity of a text file: windows of --context tokens advance by --stride; each token is scored once");
  add_model_flags(cmd, f->model);
  cmd->add_option("--file", f->file, "UTF-8 text file")->required();
  cmd->add_option("--context", f->context, "window length in tokens (default: the model's context)");
  cmd->add_option("--stride", f->stride, "window step in tokens (default: half the window)");
  return [&common, f] {
    std::string text = files::read_regular(f->file, "cannot read " + f->file + ": ", files::kMaxTextBytes);
    auto s = open_model(common, f->model);
    uint32_t N = f->context ? f->context : s.cfg.context_length;
    uint32_t S = f->stride ? f->stride : std::max(1u, N / 2);
    Tokenizer tok = load_tokenizer(s.cfg);
    require_tokenizer_fits(tok, s.cfg);
    auto ids = tok.encode(text);
    auto t0 = std::chrono::steady_clock::now();
    PerplexityResult r = perplexity(*s.model, ids, N, S);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "gpt-vk: %llu tokens scored in windows of %u, stride %u\n",
                 static_cast<unsigned long long>(r.scored), N, S);
    print_stdout("perplexity=%.4f tokens=%llu tok_s=%.1f\n", r.perplexity, static_cast<unsigned long long>(r.scored),
                r.evaluated / secs);
    return 0;
  };
}

}  // namespace gptvk::cli
