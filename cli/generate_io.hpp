// What `gpt-vk generate` reads and writes besides the model: the prompt (a flag, a file or
// stdin), --logit-bias pairs, and a completion as one line of JSON (--json).
#pragma once
#include <cstdint>
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

// All of stdin; the bytes of a file (InputError "cannot read FLAG PATH: why").
std::string read_stdin();
std::string read_file_bytes(const std::string& path, const std::string& flag);

// "ID=BIAS" -> {id, bias}; UsageError naming the flag's value when malformed.
std::pair<uint32_t, float> parse_logit_bias(const std::string& s);

// One completion as a JSON object on one line (CONTRACT: generate --json): text, tokens,
// finish_reason, `logprobs` (one per token: token, id, logprob, top) when `with_logprobs`,
// plus index, seed, prompt_tokens and timings.
// Bytes that are not valid UTF-8 become U+FFFD in the JSON strings.
std::string completion_json(const Generator& gen, const Tokenizer& tok, uint32_t index, uint64_t seed,
                            bool with_logprobs);

}  // namespace gptvk::cli
