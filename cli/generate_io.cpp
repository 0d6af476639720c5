#include "cli/generate_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/number_checks.hpp"
#include "engine/error.hpp"
#include "engine/files.hpp"
#include "engine/json_limits.hpp"
#include "models/tokenizer/utf8.hpp"

namespace gptvk::cli {

std::string read_prompt(const std::string* prompt, const std::string* prompt_file) {
  if (prompt && prompt_file) throw UsageError("give either --prompt or --prompt-file, not both");
  if (!prompt && !prompt_file)
    throw UsageError("no prompt: give --prompt TEXT, --prompt - (read stdin) or --prompt-file PATH");
  if (prompt && *prompt != "-") return *prompt;
  if (prompt) return read_stdin();
  return read_file_bytes(*prompt_file, "--prompt-file");
}

namespace {

using json = nlohmann::ordered_json;

// What a JSON value is, as an error message says it.
std::string kind_of(const json& v) {
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "true or false";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "a string";
}

// A number or a string as an error message quotes it, dumped as JSON (a string may hold a
// newline, and the message stays one line) and cut short when long; anything else by its kind.
std::string quoted(const json& v) {
  if (!v.is_number() && !v.is_string()) return kind_of(v);
  return excerpt(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

// A whole number in [lo, hi]: a line's "max_tokens" or "seed". Written 5, 5.0 or 5e0 alike
// (JSON Schema's integers, as the server takes them; Python's json.dumps writes 5.0 for a float).
template <class Bad>
uint64_t whole_number(const json& v, const std::string& key, uint64_t lo, uint64_t hi, const Bad& bad) {
  std::optional<uint64_t> x;
  if (v.is_number_unsigned()) x = v.get<uint64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && d >= 0 && d < 0x1p64) x = static_cast<uint64_t>(d);
  }
  if (!x || *x < lo || *x > hi)
    throw bad("\"" + key + "\" must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
              ", got " + quoted(v));
  return *x;
}

// One non-blank line: a JSON string, or an object with "prompt" and optional settings.
PromptSpec parse_prompt_line(const std::string& line, const std::shared_ptr<const std::string>& file,
                             size_t line_number) {
  const auto bad = [&](const std::string& what) {
    return InputError(*file + ":" + std::to_string(line_number) + ": " + what);
  };
  if (auto breach = json_limit_breach(line)) throw bad("the JSON " + *breach);
  json v;
  try {
    v = json::parse(line);
  } catch (const json::parse_error& e) {
    throw bad("not valid JSON (at column " + std::to_string(e.byte) + ")");
  }
  PromptSpec spec;
  spec.file = file;
  spec.line = line_number;
  if (v.is_string()) {
    spec.text = v.get<std::string>();
    return spec;
  }
  if (!v.is_object()) throw bad("expected a JSON string or an object with a \"prompt\" string, got " + kind_of(v));
  if (!v.contains("prompt")) throw bad("the object has no \"prompt\"");
  for (const auto& [key, value] : v.items()) {
    if (key == "prompt") {
      if (!value.is_string()) throw bad("\"prompt\" must be a string, got " + kind_of(value));
      spec.text = value.get<std::string>();
    } else if (key == "max_tokens") {
      spec.max_tokens = static_cast<uint32_t>(whole_number(value, key, 1, 1u << 30, bad));
    } else if (key == "seed") {
      spec.seed = whole_number(value, key, 0, UINT64_MAX, bad);
    } else {
      throw bad("unknown key " + quoted(json(key)) +
                " (a line's object takes prompt, max_tokens and seed)");
    }
  }
  return spec;
}

}  // namespace

std::vector<PromptSpec> parse_prompt_lines(const std::string& text, const std::string& path) {
  std::vector<PromptSpec> specs;
  const auto file = std::make_shared<const std::string>(path);
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    specs.push_back(parse_prompt_line(line, file, line_number));
  }
  if (specs.empty()) throw InputError(path + ": no prompts (give one JSON string or {\"prompt\": ...} per line)");
  return specs;
}

std::vector<PromptSpec> read_prompts(const std::vector<std::string>* prompts, const std::string* prompt_file) {
  if (prompts && prompts->empty()) prompts = nullptr;
  std::vector<PromptSpec> specs;
  if (!prompts || prompt_file) {
    const std::string text = read_prompt(prompts ? &prompts->front() : nullptr, prompt_file);
    if (prompt_file && prompt_file->ends_with(".jsonl")) return parse_prompt_lines(text, *prompt_file);
    specs.push_back({text});
    return specs;
  }
  if (std::count(prompts->begin(), prompts->end(), "-") > 1)
    throw UsageError("--prompt - reads stdin, which can be read only once");
  for (const std::string& p : *prompts) {
    specs.push_back({read_prompt(&p, nullptr)});
    if (prompts->size() > 1) specs.back().flag = specs.size();
  }
  return specs;
}

// read(2) rather than std::cin: a stream takes a failed read (stdin a directory, or closed)
// for the end of the input, and the run went on with an empty prompt.
std::string read_stdin() {
  std::string all;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(std::string("cannot read stdin: ") + std::strerror(errno));
    if (n == 0) return all;
    all.append(buf, static_cast<size_t>(n));
    if (all.size() > files::kMaxTextBytes)
      throw InputError("stdin holds more than " + std::to_string(files::kMaxTextBytes >> 20) + " MiB of text");
  }
}

std::string read_file_bytes(const std::string& path, const std::string& flag) {
  if (path == "-") return read_stdin();
  // A regular file or a pipe, at most files::kMaxTextBytes (/dev/zero cannot exhaust us).
  return files::read_regular_or_pipe(path, "cannot read " + flag + " " + path + ": ", files::kMaxTextBytes);
}

std::pair<uint32_t, float> parse_logit_bias(const std::string& s) {
  const auto bad = [&] {
    return UsageError("--logit-bias: expected TOKEN_ID=BIAS (e.g. 50256=-100), got '" + s + "'");
  };
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) throw bad();
  const std::string id_text = s.substr(0, eq), bias_text = s.substr(eq + 1);
  if (id_text.find_first_not_of("0123456789") != std::string::npos || id_text.size() > 9) throw bad();
  const std::optional<float> bias = parse_float(bias_text);
  if (!bias) throw bad();
  return {static_cast<uint32_t>(std::stoul(id_text)), *bias};
}

namespace {

json token_logprob_json(const TokenLogprob& lp, const Tokenizer& tok, uint32_t k) {
  json top = json::object();
  for (size_t i = 0; i < k && i < lp.top.size(); ++i)
    top[tokenizer::token_json_text(tok.token_bytes(lp.top[i].first))] = lp.top[i].second;
  return {{"token", tokenizer::token_json_text(tok.token_bytes(lp.token))},
          {"id", lp.token},
          {"logprob", lp.logprob},
          {"top", top}};
}

}  // namespace

std::string completion_json(const Generator& gen, const Tokenizer& tok, uint32_t index, uint32_t prompt_index,
                            uint64_t seed, std::optional<uint32_t> logprobs) {
  const auto& t = gen.timings();
  json j = {{"index", index},
            {"prompt_index", prompt_index},
            {"text", gen.text()},
            {"tokens", gen.tokens()},
            {"finish_reason", finish_reason_name(gen.finish_reason())},
            {"seed", seed},
            {"prompt_tokens", t.prompt_tokens},
            {"timings",
             {{"prefill_s", t.prefill_s},
              {"decode_s", t.decode_s},
              {"prefill_tok_s", t.prefill_tok_s()},
              // null, not 0, where no rate exists (a single generated token)
              {"decode_tok_s", t.generated_tokens > 1 ? json(t.decode_tok_s()) : json(nullptr)}}}};
  if (logprobs) {
    json lps = json::array();
    for (const auto& lp : gen.logprobs()) lps.push_back(token_logprob_json(lp, tok, *logprobs));
    j["logprobs"] = lps;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string unstarted_completion_json(uint32_t index, uint32_t prompt_index, uint64_t seed, uint32_t prompt_tokens,
                                      std::optional<uint32_t> logprobs) {
  json j = {{"index", index},
            {"prompt_index", prompt_index},
            {"text", ""},
            {"tokens", json::array()},
            {"finish_reason", finish_reason_name(FinishReason::Cancelled)},
            {"seed", seed},
            {"prompt_tokens", prompt_tokens},
            {"timings", {{"prefill_s", 0.0}, {"decode_s", 0.0}, {"prefill_tok_s", nullptr}, {"decode_tok_s", nullptr}}}};
  if (logprobs) j["logprobs"] = json::array();
  return j.dump();
}

std::string tsv_field(const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      // A NUL byte (GPT-2's token 188) would end the line where it is printed as a C string,
      // and an empty field would read as an empty token.
      case '\0': out += "\\0"; break;
      default: out += c;
    }
  }
  return out;
}

std::string logprobs_table(const Generator& gen, const Tokenizer& tok, uint32_t k) {
  std::string out = "id\ttext\tlogprob\ttop\n";
  char num[32];
  for (const TokenLogprob& lp : gen.logprobs()) {
    std::snprintf(num, sizeof num, "%.6g", lp.logprob);
    out += std::to_string(lp.token) + "\t" + tsv_field(tok.token_bytes(lp.token)) + "\t" + num + "\t";
    for (size_t i = 0; i < k && i < lp.top.size(); ++i) {
      std::snprintf(num, sizeof num, "%.6g", lp.top[i].second);
      if (i > 0) out += ' ';
      out += std::to_string(lp.top[i].first) + ":" + num;
    }
    out += "\n";
  }
  return out;
}

}  // namespace gptvk::cli
