// What `gpt-vk generate` reads and writes besides the model: the prompts (flags, a file,
// a JSON-lines file or stdin), --logit-bias pairs, and a completion as one line of JSON (--json).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/tokenizer/tokenizer.hpp"
#include "runtime/generator.hpp"

namespace gptvk::cli {

// The prompt text: `prompt` itself, all of stdin when it is "-", or the bytes of
// `prompt_file` (exactly one of the two given). UsageError when both or neither are given,
// InputError when the file cannot be read.
std::string read_prompt(const std::string* prompt, const std::string* prompt_file);

// One prompt to continue, with what a JSON line may set for it alone.
struct PromptSpec {
  std::string text;
  // The JSON-lines file and line it came from (none for a prompt of its own), kept apart:
  // a file of a million lines would otherwise hold a million copies of its path.
  std::shared_ptr<const std::string> file;
  size_t line = 0;
  size_t flag = 0;  // of several --prompt flags, which (from 1); 0 for a lone prompt
  // Names it in messages: "the prompt", "the prompt at PATH:LINE" or "--prompt #N".
  std::string where() const {
    if (file) return "the prompt at " + *file + ":" + std::to_string(line);
    return flag ? "--prompt #" + std::to_string(flag) : "the prompt";
  }
  std::optional<uint32_t> max_tokens;  // instead of --max-tokens
  std::optional<uint64_t> seed;        // instead of --seed (sample i of --num-samples: seed + i)
};

// Every prompt: each of `prompts` (read_prompt: "-" is stdin), or the `prompt_file`'s. A file
// whose name ends in .jsonl holds one prompt per non-blank line (parse_prompt_lines); any
// other file is one prompt, its bytes as they are. Errors as read_prompt's.
std::vector<PromptSpec> read_prompts(const std::vector<std::string>* prompts, const std::string* prompt_file);

// JSON lines: each non-blank line a JSON string (the prompt) or an object with a string
// "prompt" and optionally "max_tokens" (1 to 2^30) and "seed" (0 to 2^64-1), no other keys
// (a misspelt setting must not be ignored). InputError "PATH:LINE: cause" on the first bad
// line, and when no line holds a prompt. `path` only names the file in messages.
std::vector<PromptSpec> parse_prompt_lines(const std::string& text, const std::string& path);

// All of stdin, at most files::kMaxTextBytes; the bytes of a regular file of at most that
// size, or of stdin when `path` is "-" (InputError "cannot read FLAG PATH: why").
std::string read_stdin();
std::string read_file_bytes(const std::string& path, const std::string& flag);

// "ID=BIAS" -> {id, bias}; UsageError naming the flag's value when malformed.
std::pair<uint32_t, float> parse_logit_bias(const std::string& s);

// One completion as a JSON object on one line (CONTRACT: generate --json): text, tokens,
// finish_reason, `logprobs` (one per token: token, id, logprob, top with at most `logprobs`
// alternatives; 0 gives each token's own alone) when `logprobs` is set, plus index (of the
// completion), prompt_index, seed, prompt_tokens and timings.
// Bytes that are not valid UTF-8 become U+FFFD in the JSON strings.
std::string completion_json(const Generator& gen, const Tokenizer& tok, uint32_t index, uint32_t prompt_index,
                            uint64_t seed, std::optional<uint32_t> logprobs);

// The same object for a completion Ctrl-C stopped before it began (its batch never ran):
// empty text and tokens, finish_reason "cancelled", so that --json still gives one line per
// completion.
std::string unstarted_completion_json(uint32_t index, uint32_t prompt_index, uint64_t seed, uint32_t prompt_tokens,
                                      std::optional<uint32_t> logprobs);

// A token's bytes for one TSV field: backslash, tab, newline, carriage return and NUL
// escaped (\\, \t, \n, \r, \0).
std::string tsv_field(const std::string& bytes);

// A completion's log-probabilities as tab-separated lines (generate --logprobs without
// --json, on stderr): a header, then per generated token its id, text (tsv_field), logprob
// and its K alternatives as "id:logprob" separated by spaces, most probable first (none
// for K = 0).
std::string logprobs_table(const Generator& gen, const Tokenizer& tok, uint32_t k);

}  // namespace gptvk::cli
