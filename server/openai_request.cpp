#include "server/openai_request.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>

#include "engine/error.hpp"
#include "engine/json_limits.hpp"

namespace gptvk::server {

bool is_whole_number(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::trunc(d);
}

std::optional<uint32_t> token_id(const json& v, uint32_t vocab) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() < vocab ? std::optional(uint32_t(v.get<uint64_t>())) : std::nullopt;
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    return x >= 0 && x < int64_t(vocab) ? std::optional(uint32_t(x)) : std::nullopt;
  }
  if (!is_whole_number(v)) return std::nullopt;
  const double d = v.get<double>();
  return d >= 0 && d < double(vocab) ? std::optional(uint32_t(d)) : std::nullopt;
}

namespace {

constexpr uint32_t kDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr uint32_t kMaxChoices = 16;        // n per prompt
constexpr size_t kMaxPrompts = 64;          // prompts per request
constexpr size_t kMaxStops = 4;
constexpr int64_t kMaxChatTopLogprobs = 20;

ApiError bad(const std::string& field, const std::string& what, const std::string& code = "invalid_value") {
  return ApiError(400, "'" + field + "' " + what, field, code);
}

// The field, or nullptr when absent or null (OpenAI treats null as not given).
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad(key, "must be a number", "invalid_type");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(key, "must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v->dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  auto out_of_range = [&] {
    return bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v->dump());
  };
  if (!is_whole_number(*v)) throw bad(key, "must be an integer", "invalid_type");
  if (v->is_number_float()) {
    // One past 64 bits is out of range, not of the wrong type.
    const double d = v->get<double>();
    if (std::abs(d) >= 0x1p63 || d < double(lo) || d > double(hi)) throw out_of_range();
    return static_cast<int64_t>(d);
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw out_of_range();
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw out_of_range();
  return x;
}

std::optional<bool> boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad(key, "must be a boolean", "invalid_type");
  return v->get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) out.push_back(v->get<std::string>());
  else if (v->is_array()) {
    if (v->size() > kMaxStops) throw bad("stop", "holds at most 4 strings");
    for (const json& s : *v) {
      if (!s.is_string()) throw bad("stop", "must be a string or an array of strings", "invalid_type");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", "must be a string or an array of strings", "invalid_type");
  }
  for (const auto& s : out)
    if (s.empty()) throw bad("stop", "must not contain an empty string");
  return out;
}

// OpenAI's logit_bias: {"<token id>": bias in -100..100}, each id inside the vocabulary.
std::vector<std::pair<uint32_t, float>> logit_bias(const json& body, uint32_t vocab) {
  const json* b = field(body, "logit_bias");
  if (!b) return {};
  if (!b->is_object()) throw bad("logit_bias", "must be an object mapping token ids to numbers", "invalid_type");
  std::vector<std::pair<uint32_t, float>> out;
  for (const auto& [key, value] : b->items()) {
    uint64_t id = 0;
    const char* end = key.data() + key.size();
    auto [stop, ec] = std::from_chars(key.data(), end, id);
    // Plain decimal: "05" beside "5" would be the same token twice.
    if (key.empty() || ec != std::errc() || stop != end || (key.size() > 1 && key[0] == '0'))
      throw bad("logit_bias", "has key \"" + excerpt(key) + "\", which is not a token id", "invalid_type");
    if (id >= vocab)
      throw bad("logit_bias", "has token id " + key + " outside the vocabulary of " + std::to_string(vocab));
    if (!value.is_number()) throw bad("logit_bias", "must map token ids to numbers", "invalid_type");
    const double x = value.get<double>();
    if (!std::isfinite(x) || x < -100 || x > 100)
      throw bad("logit_bias", "values must be between -100 and 100, got " + value.dump() + " for token " + key);
    out.emplace_back(static_cast<uint32_t>(id), static_cast<float>(x));
  }
  return out;
}

// The sampling controls (README "Steering and scripting generation"): OpenAI's penalties
// and logit_bias, and llama.cpp's repeat_penalty, repeat_last_n and min_p.
void parse_controls(ops::SamplingParams& p, const json& body, uint32_t vocab) {
  p.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2).value_or(0.0));
  p.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2).value_or(0.0));
  p.repeat_penalty =
      static_cast<float>(number(body, "repeat_penalty", 0, std::numeric_limits<float>::max()).value_or(1.0));
  if (p.repeat_penalty <= 0) throw bad("repeat_penalty", "must be above 0 (1 = off)");
  p.repeat_last_n = static_cast<int32_t>(
      integer(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()).value_or(p.repeat_last_n));
  p.min_p = static_cast<float>(number(body, "min_p", 0, 1).value_or(0.0));
  p.logit_bias = logit_bias(body, vocab);
}

std::vector<uint32_t> token_ids(const json& arr, uint32_t vocab) {
  std::vector<uint32_t> ids;
  for (const json& t : arr) {
    if (!is_whole_number(t)) throw bad("prompt", "must be a string, an array of strings, token ids or arrays of token ids", "invalid_type");
    const auto id = token_id(t, vocab);
    if (!id) throw bad("prompt", "holds token id " + t.dump() + " outside the vocabulary of " + std::to_string(vocab));
    ids.push_back(*id);
  }
  return ids;
}

// The prompt's text is its tokens' (text_offset indexes into it): a string prompt's own
// bytes for GPT-2, whose tokens give back any text exactly, and GPT-1's normalized words
// ("The Theater" echoes as "the theater "). An empty prompt starts from <|endoftext|> (or
// the model file's bos token), as GPT-2 was trained to begin documents, and so does every
// text prompt where the model file asks for it (encode_document); echo then shows that
// token's text, as it does for a prompt of its id.
void add_prompt(CompletionRequest& r, std::vector<uint32_t> ids, const Tokenizer& tok) {
  if (ids.empty()) {
    if (!tok.start_id()) throw bad("prompt", "is empty and the vocabulary has no <|endoftext|> to start from");
    ids.push_back(*tok.start_id());
  }
  r.prompt_texts.push_back(tok.decode(ids));
  r.prompts.push_back(std::move(ids));
}

void parse_prompts(CompletionRequest& r, const json& body, const Tokenizer& tok) {
  const json* p = field(body, "prompt");
  if (!p) throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
  const uint32_t vocab = tok.vocab_size();
  const char* shape = "must be a string, an array of strings, token ids or arrays of token ids";
  if (p->is_string()) {
    add_prompt(r, tok.encode_document(p->get<std::string>()), tok);
    return;
  }
  if (!p->is_array() || p->empty()) throw bad("prompt", p->is_array() ? "must not be empty" : shape, "invalid_type");
  if ((*p)[0].is_number()) {  // one prompt of token ids (its length is checked against the context later)
    add_prompt(r, token_ids(*p, vocab), tok);
    return;
  }
  if (p->size() > kMaxPrompts) throw bad("prompt", "holds at most " + std::to_string(kMaxPrompts) + " prompts");
  for (const json& one : *p) {
    if (one.is_string()) add_prompt(r, tok.encode_document(one.get<std::string>()), tok);
    else if (one.is_array()) add_prompt(r, token_ids(one, vocab), tok);
    else throw bad("prompt", shape, "invalid_type");
  }
}

// `prompt_param`: the field the prompt came from ("prompt", "messages"), named as the cause
// when the prompt alone leaves no room (chat's default max_tokens is the room left);
// `length_param` the field that set the completion's length.
void check_fits(const CompletionRequest& r, uint32_t context, const char* prompt_param,
                const char* length_param = "max_tokens") {
  for (const auto& ids : r.prompts) {
    const bool generates = r.sampling.options.max_tokens > 0;  // 0: echo scores the prompt alone
    if (ids.size() + generates > context)
      throw ApiError(400,
                     "This model's maximum context length is " + std::to_string(context) + " tokens, however your " +
                         prompt_param + " resulted in " + std::to_string(ids.size()) + " tokens" +
                         (generates ? ", which leaves none for the completion" : "") +
                         ". Please reduce the length of the " + prompt_param + ".",
                     prompt_param, "context_length_exceeded");
    const uint64_t want = ids.size() + uint64_t(r.sampling.options.max_tokens);
    if (want > context)
      throw ApiError(400,
                     "This model's maximum context length is " + std::to_string(context) + " tokens, however you requested " +
                         std::to_string(want) + " tokens (" + std::to_string(ids.size()) + " in your prompt; " +
                         std::to_string(r.sampling.options.max_tokens) +
                         " for the completion). Please reduce your prompt or completion length.",
                     length_param, "context_length_exceeded");
  }
}

void parse_common(CompletionRequest& r, const json& body, bool chat, uint32_t vocab) {
  r.sampling = generation_options_from_json(body, chat, vocab);
  r.n = static_cast<uint32_t>(integer(body, "n", 1, kMaxChoices).value_or(1));
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "must be an object", "invalid_type");
    if (!r.stream) throw bad("stream_options", "is only allowed with 'stream': true");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  if (const json* u = field(body, "user"); u && !u->is_string()) throw bad("user", "must be a string", "invalid_type");
  if (const json* m = field(body, "model"); m && !m->is_string()) throw bad("model", "must be a string", "invalid_type");
}

// Chat features a GPT-2 model has no way to honour: tool calls and structured output (no
// constrained decoding). Refused, so that a client relying on them is told rather than
// handed plain text; their "off" values (no tools, tool_choice "none", response_format
// "text") pass.
void refuse_chat_features(const json& body) {
  for (const char* key : {"tools", "functions"})
    if (const json* t = field(body, key); t && !t->is_array()) throw bad(key, "must be an array", "invalid_type");
  for (const char* key : {"tools", "functions"})
    if (const json* t = field(body, key); t && !t->empty())
      throw ApiError(400, std::string("'") + key + "' (tool calling) is not supported by this server", key,
                     "unsupported_parameter");
  for (const char* key : {"tool_choice", "function_call"})
    if (const json* c = field(body, key); c && *c != "none")
      throw ApiError(400, std::string("'") + key + "' other than \"none\" is not supported by this server (no tool calling)",
                     key, "unsupported_parameter");
  // Output other than text (audio) is refused too, rather than answered with text alone.
  if (const json* m = field(body, "modalities")) {
    if (!m->is_array()) throw bad("modalities", "must be an array of strings", "invalid_type");
    for (const json& x : *m)
      if (x != "text")
        throw ApiError(400, "'modalities' other than [\"text\"] are not supported by this server", "modalities",
                       "unsupported_parameter");
  }
  if (field(body, "audio"))
    throw ApiError(400, "'audio' output is not supported by this server", "audio", "unsupported_parameter");
  if (const json* f = field(body, "response_format")) {
    if (!f->is_object() || !f->contains("type") || !f->at("type").is_string())
      throw bad("response_format", "must be an object with a string 'type'", "invalid_type");
    if (f->at("type") != "text")
      throw ApiError(400, "'response_format' of type " + excerpt(f->at("type").dump()) + " is not supported by this server (only \"text\")",
                     "response_format", "unsupported_parameter");
  }
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

SamplingRequest generation_options_from_json(const json& body, bool chat, uint32_t vocab) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
  SamplingRequest r;
  ops::SamplingParams& p = r.options.sampling;
  p.temperature = static_cast<float>(number(body, "temperature", 0, 2).value_or(1.0));
  p.top_p = static_cast<float>(number(body, "top_p", 0, 1).value_or(1.0));
  if (p.top_p <= 0) throw bad("top_p", "must be above 0 (and at most 1)");
  // llama.cpp's extension; 0 or below is off, as in llama.cpp's server (and vLLM's -1).
  const int64_t top_k = integer(body, "top_k", std::numeric_limits<int64_t>::min(), std::numeric_limits<uint32_t>::max())
                            .value_or(0);
  p.top_k = static_cast<uint32_t>(std::max<int64_t>(top_k, 0));
  if (auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    r.seed_given = true;
    p.seed = static_cast<uint64_t>(*seed);
  }
  parse_controls(p, body, vocab);
  // Completions take 0 with echo (parse_completion_request): the prompt scored, nothing made.
  std::optional<int64_t> max_tokens = integer(body, "max_tokens", chat ? 1 : 0, std::numeric_limits<uint32_t>::max());
  // Chat's newer name, which OpenAI deprecated max_tokens for: it wins when both are sent
  // (as in vLLM); max_tokens is still checked.
  const auto max_completion_tokens =
      chat ? integer(body, "max_completion_tokens", 1, std::numeric_limits<uint32_t>::max()) : std::nullopt;
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  // Chat without a limit: up to the context (parse_chat_request fills in the room left).
  r.options.max_tokens = static_cast<uint32_t>(max_tokens.value_or(chat ? 0 : kDefaultMaxTokens));
  r.options.stop = stop_strings(body);
  return r;
}

uint64_t choice_seed(const SamplingRequest& s, uint32_t index) {
  if (s.seed_given) return s.options.sampling.seed + index;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

CompletionRequest parse_completion_request(const json& body, const Tokenizer& tok, uint32_t context) {
  CompletionRequest r;
  parse_common(r, body, false, tok.vocab_size());
  r.echo = boolean(body, "echo").value_or(false);
  if (auto k = integer(body, "logprobs", 0, 5)) r.logprobs = static_cast<uint32_t>(*k);
  if (auto best_of = integer(body, "best_of", 1, kMaxChoices); best_of && *best_of != r.n)
    throw ApiError(400, "'best_of' other than n is not supported by this server", "best_of", "unsupported_parameter");
  if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    throw ApiError(400, "'suffix' is not supported by this server", "suffix", "unsupported_parameter");
  // max_tokens 0 makes a sequence that only scores its prompt.
  if (r.sampling.options.max_tokens == 0 && !r.echo)
    throw bad("max_tokens", "must be at least 1 (0 only with 'echo': true, to score the prompt)");
  parse_prompts(r, body, tok);
  check_fits(r, context, "prompt");
  return r;
}

// Keys an object in a request may have. No field needs more: logit_bias maps a few hundred ids
// at most in practice, and under this cap building the body takes milliseconds.
constexpr size_t kMaxObjectKeys = 1024;

json parse_body(const std::string& text) {
  if (auto breach = json_limit_breach(text, {.max_object_keys = kMaxObjectKeys}))
    throw ApiError(400, "the request body " + *breach, "", "invalid_value");
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
  return body;
}

std::string chat_transcript(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw bad("messages", "must be a non-empty array of {role, content}", "invalid_type");
  std::string out;
  for (const json& m : messages) {
    if (!m.is_object()) throw bad("messages", "must be a non-empty array of {role, content}", "invalid_type");
    const json* role = field(m, "role");
    const json* content = field(m, "content");
    if (!role || !role->is_string()) throw bad("messages", "each message needs a string 'role'", "invalid_type");
    // An assistant message may have none (OpenAI's tool calls); the others say something.
    if (!content && role->get<std::string>() != "assistant")
      throw bad("messages", "a '" + role->get<std::string>() + "' message needs 'content'", "missing_required_parameter");
    std::string text;
    if (content && content->is_string()) text = content->get<std::string>();
    else if (content && content->is_array()) {
      // [{"type": "text", "text": ...}], and an assistant's {"type": "refusal", "refusal": ...}.
      const bool assistant = role->get<std::string>() == "assistant";
      for (const json& part : *content) {
        const char* key = part.is_object() && part.contains("type") && part["type"] == "refusal" && assistant
                              ? "refusal" : "text";
        if (!part.is_object() || !part.contains("type") || part["type"] != key || !part.contains(key) ||
            !part[key].is_string())
          throw bad("messages", "content parts must be {\"type\": \"text\", \"text\": string}", "invalid_type");
        text += part[key].get<std::string>();
      }
    } else if (content) throw bad("messages", "each message's 'content' must be a string or text parts", "invalid_type");
    const std::string r = role->get<std::string>();
    if (r == "system" || r == "developer") out += text + "\n\n";
    else if (r == "user") out += "User: " + text + "\n";
    else if (r == "assistant") out += "Assistant: " + text + "\n";
    else throw bad("messages", "has an unknown role '" + r + "' (system, developer, user, assistant)");
  }
  return out + "Assistant:";
}

CompletionRequest parse_chat_request(const json& body, const Tokenizer& tok, uint32_t context) {
  CompletionRequest r;
  parse_common(r, body, true, tok.vocab_size());
  refuse_chat_features(body);
  for (const char* key : {"prompt", "echo", "suffix", "best_of"})
    if (field(body, key))
      throw ApiError(400, std::string("'") + key + "' is a /v1/completions field, not a chat one", key,
                     "unsupported_parameter");
  // OpenAI's chat shape: logprobs is a switch, top_logprobs (0..20) the alternatives.
  const auto top = integer(body, "top_logprobs", 0, kMaxChatTopLogprobs);
  if (boolean(body, "logprobs").value_or(false)) r.logprobs = static_cast<uint32_t>(top.value_or(0));
  else if (top) throw bad("top_logprobs", "needs 'logprobs': true");
  const json* messages = field(body, "messages");
  if (!messages) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
  const std::string transcript = chat_transcript(*messages);
  add_prompt(r, tok.encode_document(transcript), tok);
  r.sampling.options.stop.push_back("\nUser:");
  // The model's first space follows the transcript's "Assistant:"; the reply (and what stop
  // strings match) begins after it.
  r.sampling.options.drop_leading_space = true;
  if (r.sampling.options.max_tokens == 0)
    r.sampling.options.max_tokens = r.prompts[0].size() < context ? context - static_cast<uint32_t>(r.prompts[0].size()) : 1;
  check_fits(r, context, "messages", field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens");
  return r;
}

}  // namespace gptvk::server
