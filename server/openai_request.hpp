// OpenAI-style request bodies (POST /v1/completions, /v1/chat/completions) checked and turned
// into what the scheduler runs. Every problem is an ApiError carrying the HTTP status and
// OpenAI's error fields, so the server answers {"error": {message, type, param, code}}.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/tokenizer/tokenizer.hpp"
#include "runtime/generator.hpp"

namespace gptvk::server {

// Insertion-ordered objects: answers keep OpenAI's field order, and a top_logprobs object lists
// its alternatives most probable first, as OpenAI's do (clients read its first entry as the best).
using json = nlohmann::ordered_json;

struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), message(message), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string message;  // whole: what() ends at a NUL byte the message may quote from a request
  std::string type, param, code;
};

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
json error_body(const ApiError& e);

// Whether `v` is an integer as JSON Schema (and so OpenAI's API reference) counts them: any
// number without a fractional part, so 2, 2.0 (Python's json.dumps of a float) and 1e3.
bool is_whole_number(const json& v);

// A whole number `v` as a token id below `vocab`; nullopt for anything else.
std::optional<uint32_t> token_id(const json& v, uint32_t vocab);

// A request body: a JSON object, or an ApiError 400 (not JSON, not an object, or an object
// with more keys than any request needs).
json parse_body(const std::string& text);

// The sampling and stopping fields both endpoints share, mapped into GenerationOptions: the
// one place to extend when ops::SamplingParams gains a control. temperature (0..2), top_p
// (0, 1], top_k, seed, stop, max_tokens (chat also max_completion_tokens), OpenAI's
// presence_penalty and frequency_penalty (-2..2) and logit_bias ({"<token id>": -100..100},
// ids below `vocab`), llama.cpp's repeat_penalty (> 0), repeat_last_n (-1, 0 or more) and
// min_p (0..1). A bad value is an ApiError 400 whose param names the field.
struct SamplingRequest {
  GenerationOptions options;
  bool seed_given = false;  // without one each sequence draws a random seed
};
SamplingRequest generation_options_from_json(const json& body, bool chat, uint32_t vocab);

struct CompletionRequest {
  std::vector<std::vector<uint32_t>> prompts;  // token ids, one list per prompt
  std::vector<std::string> prompt_texts;       // their text (what echo prepends)
  SamplingRequest sampling;
  uint32_t n = 1;
  bool stream = false, echo = false;
  std::optional<uint32_t> logprobs;  // alternatives: 0..5 (completions), 0..20 (chat top_logprobs)
  bool include_usage = false;        // stream_options.include_usage
};

// Checks `body` (a parsed JSON value) against OpenAI's /v1/completions; prompts are
// tokenized, and each must leave room for max_tokens in `context`.
CompletionRequest parse_completion_request(const json& body, const Tokenizer& tok, uint32_t context);

// /v1/chat/completions: the messages rendered by chat_transcript() as the one prompt, with
// "\nUser:" added to the stop strings so the model's turn ends where the next would begin.
CompletionRequest parse_chat_request(const json& body, const Tokenizer& tok, uint32_t context);

// The plain transcript template (GPT-2 is not chat-tuned): each system (or developer)
// message's content followed by a blank line, then "User: <content>\n" /
// "Assistant: <content>\n" per turn, ending with "Assistant:" for the model to continue.
std::string chat_transcript(const json& messages);

// The seed of choice `index`: seed + index with a seed, else a random one.
uint64_t choice_seed(const SamplingRequest& s, uint32_t index);

}  // namespace gptvk::server
