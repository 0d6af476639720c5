// `gpt-vk score`: the log-probability of every token of a text under the model, with the
// sliding window of `perplexity` (models/perplexity.hpp, the same loop, so the mean of its
// log-probabilities is minus the log of perplexity's value for the same window and stride).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/generate_io.hpp"
#include "cli/interrupt.hpp"
#include "cli/model_session.hpp"
#include "cli/number_checks.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "models/perplexity.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::cli {

Action add_score(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string file, text;
    std::optional<uint32_t> context, stride;  // none: the defaults (a 0 given is refused, as 1 is)
    bool tsv = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "score",
      "the log-probability of every token of a text (--file, --text, or stdin when neither), scored\n"
      "with perplexity's windows (see `gpt-vk perplexity --help` for which tokens are scored).\n"
      "stdout: one JSON object per scored token and line, {\"id\", \"text\", \"logprob\", \"rank\"}:\n"
      "logprob the natural log of its probability, rank 1 + the number of tokens the model found\n"
      "more likely; text the token's UTF-8, or \"bytes:\\\\xNN...\" for a token that is part of a\n"
      "character (as generate --json writes them); with --tsv a header line and tab-separated id,\n"
      "text, logprob, rank (\\\\, \\t, \\n, \\r and \\0, a NUL byte, escaped in text). stderr: the\n"
      "count, mean log-probability and perplexity.");
  add_model_flags(cmd, f->model);
  auto* file = cmd->add_option("-f,--file", f->file, "text file to score (its bytes as they are; - reads stdin)");
  cmd->add_option("--text", f->text, "text to score")->excludes(file);
  add_window_flags(cmd, f->context, f->stride);
  cmd->add_flag("--tsv", f->tsv, "tab-separated values instead of JSON lines");
  return [&common, f, cmd] {
    const bool has_text = cmd->get_option("--text")->count() > 0;
    const bool has_file = cmd->get_option("--file")->count() > 0;
    const std::string text = has_text ? f->text : has_file ? read_file_bytes(f->file, "--file") : read_stdin();
    auto s = open_model(common, f->model);
    const uint32_t N = f->context.value_or(s.cfg.context_length);
    const uint32_t S = f->stride.value_or(std::max(1u, N / 2));
    Tokenizer tok = load_model_tokenizer(s.cfg);
    const auto ids = tok.encode_document(text);
    ProgressBar bar("score");
    // The TSV header goes out with the first token (every text score_windows accepts has
    // one), so that a text it refuses leaves stdout empty, as in JSON.
    bool header_out = false;
    auto print = [&](const ScoredToken& t) {
      const std::string& bytes = tok.token_bytes(t.id);
      if (f->tsv && !std::exchange(header_out, true)) write_stdout("id\ttext\tlogprob\trank\n");
      if (f->tsv) {
        print_stdout("%u\t%s\t%.9g\t%u\n", t.id, tsv_field(bytes).c_str(), t.logprob, t.rank);
      } else {
        nlohmann::ordered_json j = {
            {"id", t.id}, {"text", tokenizer::token_json_text(bytes)}, {"logprob", t.logprob}, {"rank", t.rank}};
        write_stdout(j.dump() + "\n");
      }
    };
    const SigintFlag sigint;
    PerplexityResult r = score_windows(*s.model, ids, N, S, print, [&](uint64_t done, uint64_t total) {
      bar.update(done, total);
      return !sigint.raised();
    });
    bar.clear();
    if (r.stopped) std::fprintf(stderr, "gpt-vk: interrupted: the lines above are the tokens scored so far\n");
    std::fprintf(stderr, "gpt-vk: %llu of %zu tokens scored in windows of %u, stride %u; mean logprob %.6f, PPL %.4f\n",
                 static_cast<unsigned long long>(r.scored), ids.size(), N, S, r.mean_logprob, r.perplexity);
    return r.stopped ? SigintFlag::kExitCode : 0;
  };
}

}  // namespace gptvk::cli
