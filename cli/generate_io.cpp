#include "cli/generate_io.hpp"

#include <cmath>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/error.hpp"
#include "engine/files.hpp"

namespace gptvk::cli {

std::string read_prompt(const std::string* prompt, const std::string* prompt_file) {
  if (prompt && prompt_file) throw UsageError("give either --prompt or --prompt-file, not both");
  if (!prompt && !prompt_file)
    throw UsageError("no prompt: give --prompt TEXT, --prompt - (read stdin) or --prompt-file PATH");
  if (prompt && *prompt != "-") return *prompt;
  if (prompt) return read_stdin();
  return read_file_bytes(*prompt_file, "--prompt-file");
}

std::string read_stdin() {
  std::ostringstream all;
  all << std::cin.rdbuf();
  if (std::cin.bad()) throw InputError("cannot read stdin");
  return all.str();
}

std::string read_file_bytes(const std::string& path, const std::string& flag) {
  // Regular files only, at most files::kMaxTextBytes (a FIFO or /dev/zero cannot hang or exhaust us).
  return files::read_regular(path, "cannot read " + flag + " " + path + ": ", files::kMaxTextBytes);
}

std::pair<uint32_t, float> parse_logit_bias(const std::string& s) {
  const auto bad = [&] {
    return UsageError("--logit-bias: expected TOKEN_ID=BIAS (e.g. 50256=-100), got '" + s + "'");
  };
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) throw bad();
  const std::string id_text = s.substr(0, eq), bias_text = s.substr(eq + 1);
  if (id_text.find_first_not_of("0123456789") != std::string::npos || id_text.size() > 9) throw bad();
  size_t used = 0;
  float bias = 0;
  try {
    bias = std::stof(bias_text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (used != bias_text.size() || !std::isfinite(bias)) throw bad();
  return {static_cast<uint32_t>(std::stoul(id_text)), bias};
}

namespace {

using json = nlohmann::ordered_json;

json token_logprob_json(const TokenLogprob& lp, const Tokenizer& tok) {
  json top = json::object();
  for (auto [id, logprob] : lp.top) top[tok.token_bytes(id)] = logprob;
  return {{"token", tok.token_bytes(lp.token)}, {"id", lp.token}, {"logprob", lp.logprob}, {"top", top}};
}

}  // namespace

std::string completion_json(const Generator& gen, const Tokenizer& tok, uint32_t index, uint64_t seed,
                            bool with_logprobs) {
  const auto& t = gen.timings();
  json j = {{"index", index},
            {"text", gen.text()},
            {"tokens", gen.tokens()},
            {"finish_reason", finish_reason_name(gen.finish_reason())},
            {"seed", seed},
            {"prompt_tokens", t.prompt_tokens},
            {"timings",
             {{"prefill_s", t.prefill_s},
              {"decode_s", t.decode_s},
              {"prefill_tok_s", t.prefill_tok_s()},
              {"decode_tok_s", t.decode_tok_s()}}}};
  if (with_logprobs) {
    json lps = json::array();
    for (const auto& lp : gen.logprobs()) lps.push_back(token_logprob_json(lp, tok));
    j["logprobs"] = lps;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gptvk::cli
