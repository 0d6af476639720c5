// `gpt-vk tokenize [--config CFG] (--text TEXT | --file PATH) [--special] [--pieces] [--no-bos]`: BPE
// encoding (GPT-2's byte-level one, or GPT-1's) with the tokenizer files named in the config
// (default: the bundled model's); prints the ids separated by single spaces on one line, or
// with --pieces one token per line with its text.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/generate_io.hpp"
#include "cli/model_rules.hpp"
#include "cli/model_session.hpp"
#include "cli/output.hpp"
#include "engine/error.hpp"
#include "models/config.hpp"
#include "models/tokenizer/tokenizer.hpp"

#include <nlohmann/json.hpp>

namespace gptvk::cli {

namespace {

struct TokenizeArgs {
  ModelFlags model;
  std::string text, file;
  bool special = false, pieces = false, no_bos = false;
};

}  // namespace

Action add_tokenize(CLI::App& app, Common&) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "BPE encoding (GPT-2's byte-level BPE, or GPT-1's): prints the token ids on one line");
  add_model_source_flags(cmd, args->model);  // --config (its [tokenizer]) or --model
  auto* text = cmd->add_option("-p,--text", args->text, "the text to encode");
  auto* file = cmd->add_option("-f,--file", args->file, "encode the bytes of this file (- reads stdin)");
  text->excludes(file);
  cmd->add_flag("--special", args->special,
                "read <|endoftext|> (id 50256 in GPT-2) and the model's other special tokens in the input as "
                "tokens rather than as plain text, which is the default, as in GPT-2's own encoder");
  cmd->add_flag("--no-bos", args->no_bos,
                "leave out the bos token a model file may ask for before every text (GGUF add_bos_token, a "
                "snapshot's tokenizer_config.json), which the ids otherwise begin with, as llama-tokenize's");
  cmd->add_flag("--pieces", args->pieces,
                "one token per line instead: its id, a tab, and its text as a JSON string (bytes that are not "
                "valid UTF-8 shown as U+FFFD)");
  cmd->footer(
      "GPT-2: input that is not valid UTF-8 is encoded losslessly: each byte that is not part of a valid UTF-8 "
      "character becomes its own byte-level token, so `detokenize` gives back the exact input bytes.\n"
      "GPT-1 (a vocabulary of \"word</w>\" tokens, as Hugging Face's openai-gpt): the text is lowercased, "
      "accents stripped and words split from punctuation first, as transformers' tokenizer does, so "
      "`detokenize` gives back that normalized text, each word followed by a space.");
  return [args, text, file] {
    if (text->count() == 0 && file->count() == 0) throw UsageError("tokenize needs --text TEXT or --file PATH");
    std::string input = file->count() ? read_file_bytes(args->file, "--file") : args->text;
    Tokenizer tok = load_tokenizer(resolve_model_config(args->model));
    require_special_token(tok, args->special);
    std::vector<uint32_t> ids =
        args->no_bos ? tok.encode(input, args->special) : tok.encode_document(input, args->special);
    std::string line;
    line.reserve(ids.size() * 6 + 1);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (args->pieces) {
        line += std::to_string(ids[i]) + '\t' +
                nlohmann::json(tok.token_bytes(ids[i])).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                '\n';
        continue;
      }
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    if (!args->pieces) line += '\n';
    write_stdout(line);
    return 0;
  };
}

}  // namespace gptvk::cli
