// `gpt-vk detokenize [--config CFG] --ids 464,2068` (or `--ids -`, from stdin): prints the
// text of the ids, byte-exact (no newline added), with the config's tokenizer (default: the
// bundled model's).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/generate_io.hpp"
#include "cli/model_session.hpp"
#include "cli/output.hpp"
#include "models/tokenizer/id_list.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace gptvk::cli {

namespace {

struct DetokenizeArgs {
  ModelFlags model;
  std::string ids;
};

}  // namespace

Action add_detokenize(CLI::App& app, Common&) {
  auto args = std::make_shared<DetokenizeArgs>();
  auto* cmd = app.add_subcommand("detokenize", "prints the text of token ids (GPT-2's bytes exactly; GPT-1's words each followed by a space)");
  add_model_source_flags(cmd, args->model);  // --config (its [tokenizer]) or --model
  cmd->add_option("--ids", args->ids,
                  "token ids separated by commas (or spaces), e.g. 464,2068; - reads them from stdin (as tokenize "
                  "prints them: tokenize --file F | detokenize --ids -)")
      ->required();
  return [args] {
    std::vector<uint32_t> ids = args->ids == "-" ? parse_id_list(read_stdin(), "stdin") : parse_id_list(args->ids);
    Tokenizer tok = load_tokenizer(resolve_model_config(args->model));
    std::string text = tok.decode(ids);
    write_stdout(text);
    return 0;
  };
}

}  // namespace gptvk::cli
