// `gpt-vk perplexity`: token-level perplexity of a text file with a sliding window
// (models/perplexity.hpp); prints the value, its standard error and the tokens/s evaluated.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/generate_io.hpp"
#include "cli/interrupt.hpp"
#include "cli/model_session.hpp"
#include "cli/number_checks.hpp"
#include "cli/progress.hpp"
#include "cli/output.hpp"
#include "models/perplexity.hpp"

namespace gptvk::cli {

Action add_perplexity(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string file;
    std::optional<uint32_t> context, stride;  // none: the defaults (a 0 given is refused, as 1 is)
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "perplexity of a text file: windows of --context tokens start every --stride tokens. A token is\n"
      "scored at most once, in the first window holding it and the token before it: token 0 never,\n"
      "all others when --stride < --context, and when they are equal all but each window's first.\n"
      "A model file that asks for a bos token before every text (add_bos_token) gets it once, before\n"
      "token 0, which is then scored (llama-perplexity puts one before every chunk instead).\n"
      "stdout: perplexity=P tokens=SCORED tok_s=RATE ppl_se=SE, SE the standard error of P (as\n"
      "llama-perplexity's +/-; nan when one token is scored). A progress bar shows on stderr when it\n"
      "is a terminal.");
  add_model_flags(cmd, f->model);
  cmd->add_option("-f,--file", f->file, "UTF-8 text file (- reads stdin)")->required();
  add_window_flags(cmd, f->context, f->stride);
  return [&common, f] {
    std::string text = read_file_bytes(f->file, "--file");
    auto s = open_model(common, f->model);
    uint32_t N = f->context.value_or(s.cfg.context_length);
    uint32_t S = f->stride.value_or(std::max(1u, N / 2));
    Tokenizer tok = load_model_tokenizer(s.cfg);
    auto ids = tok.encode_document(text);
    auto t0 = std::chrono::steady_clock::now();
    ProgressBar bar("perplexity");
    const SigintFlag sigint;
    PerplexityResult r = score_windows(*s.model, ids, N, S, {}, [&](uint64_t done, uint64_t total) {
      bar.update(done, total);
      check_stdout_reader();
      return !sigint.raised();
    });
    bar.clear();
    if (r.stopped) std::fprintf(stderr, "gpt-vk: interrupted: the result covers the tokens scored so far\n");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "gpt-vk: %llu of %zu tokens scored in windows of %u, stride %u; PPL = %.4f +/- %.4f\n",
                 static_cast<unsigned long long>(r.scored), ids.size(), N, S, r.perplexity, r.perplexity_se);
    print_stdout("perplexity=%.4f tokens=%llu tok_s=%.1f ppl_se=%.4f\n", r.perplexity,
                 static_cast<unsigned long long>(r.scored), r.evaluated / secs, r.perplexity_se);
    return r.stopped ? SigintFlag::kExitCode : 0;
  };
}

}  // namespace gptvk::cli
