#include "server/completion_job.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <utility>

#include "models/tokenizer/utf8.hpp"

namespace gptvk::server {

namespace {

std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%06llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(std::time(nullptr)), static_cast<unsigned long long>(++counter));
  return buf;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

CompletionJob::CompletionJob(CompletionRequest request, bool chat, std::string model_name, Scheduler& scheduler,
                             const Tokenizer& tok)
    : req_(std::move(request)), chat_(chat), model_(std::move(model_name)), id_(new_id(chat)),
      created_(static_cast<long long>(std::time(nullptr))), tok_(tok) {
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (size_t p = 0; p < req_.prompts.size(); ++p)
    for (uint32_t i = 0; i < req_.n; ++i) {
      GenerationOptions o = req_.sampling.options;
      o.sampling.seed = choice_seed(req_.sampling, i);
      o.logprobs = req_.logprobs.value_or(0);
      // logprobs = 0 still lists each token's own log-probability: ask the generator for one
      // alternative and leave it out of top_logprobs.
      if (req_.logprobs) o.logprobs = std::max(1u, *req_.logprobs);
      // A chat reply's first token lists its alternatives without the leading space the
      // content leaves out, so two of them can be one text, listed once: twice as many
      // candidates leave the k distinct ones OpenAI's top_logprobs promises.
      if (chat_ && req_.logprobs && o.drop_leading_space) o.logprobs *= 2;
      Choice c;
      c.index = static_cast<uint32_t>(choices_.size());
      c.prompt = p;
      c.seq = std::make_shared<Sequence>(req_.prompts[p], o, req_.echo && req_.logprobs.has_value());
      seqs.push_back(c.seq);
      choices_.push_back(std::move(c));
    }
  scheduler.submit(seqs);
}

CompletionJob::~CompletionJob() { cancel(); }

void CompletionJob::cancel() {
  for (auto& c : choices_) c.seq->cancel();
}

void CompletionJob::take_step(Choice& c, const GenerationStep& s, std::string* piece, json* piece_logprobs) {
  if (s.token) {
    ++c.generated;
    c.tokens.push_back(*s.token);
    if (s.logprob) {
      c.offsets.push_back(c.token_end);
      c.logprobs.push_back(*s.logprob);
    }
    const std::string bytes = tok_.token_bytes(*s.token);
    // Chat's text leaves out the space its first token begins with (TextStream): so do the
    // offsets and that token's logprobs entry.
    const bool drop = c.generated == 1 && req_.sampling.options.drop_leading_space && bytes.starts_with(' ');
    c.token_end += bytes.size() - (drop ? 1 : 0);
  }
  c.text += s.text;
  if (piece) *piece += s.text;
  const json lp = release_logprobs(c, false);
  if (piece_logprobs) *piece_logprobs = lp;
}

// The log-probabilities of the tokens whose text is out: those that start inside the text so
// far (a token's text may be held back while it could begin a stop string); at the end
// (`finished`) all that are left, unless a stop string cut the text: the tokens past the
// cut are not part of the completion. Their JSON, or null when none were released.
json CompletionJob::release_logprobs(Choice& c, bool finished) {
  const size_t from = c.logprobs_sent;
  if (finished && c.seq->finish_reason() != FinishReason::StopString) c.logprobs_sent = c.logprobs.size();
  while (c.logprobs_sent < c.logprobs.size() && c.offsets[c.logprobs_sent] < c.text.size()) ++c.logprobs_sent;
  if (!req_.logprobs || c.logprobs_sent == from) return nullptr;
  return chat_ ? chat_logprobs_json(c, from, c.logprobs_sent) : logprobs_json(c, from, c.logprobs_sent, false);
}

// The text a choice starts with: the prompt's when echoed, and the token offsets from its end.
void CompletionJob::begin_text(Choice& c) {
  c.started = true;
  if (req_.echo && !chat_) c.text = req_.prompt_texts[c.prompt];
  c.token_end = c.text.size();
}

// Why a finished choice has no proper end: its generation failed, or the server cancelled it
// on shutdown (a client's own cancel leaves no one to tell). OpenAI has no finish_reason
// for either.
std::optional<ApiError> CompletionJob::failure(const Choice& c) const {
  if (!c.seq->error().empty())
    return ApiError(500, "generation failed: " + c.seq->error(), "", "generation_failed", "server_error");
  if (c.seq->finish_reason() == FinishReason::Cancelled)
    return ApiError(503, "the server shut down before this completion finished", "", "shutting_down",
                    "unavailable_error");
  return std::nullopt;
}

std::string CompletionJob::finish_reason(const Choice& c) const {
  return finish_reason_name(c.seq->finish_reason());
}

// OpenAI's legacy logprobs: text_offset counts characters from the start of the prompt,
// echoed or not, and top_logprobs always holds the chosen token (up to logprobs + 1 entries).
json CompletionJob::logprobs_json(const Choice& c, size_t from, size_t to, bool with_prompt) const {
  json tokens = json::array(), token_lp = json::array(), top = json::array();
  std::vector<size_t> byte_offsets;
  const uint32_t k = req_.logprobs.value_or(0);
  const std::string before = req_.echo ? std::string() : req_.prompt_texts[c.prompt];
  auto add = [&](const TokenLogprob& lp, size_t offset) {
    const std::string key = tokenizer::token_json_text(tok_.token_bytes(lp.token));
    tokens.push_back(key);
    token_lp.push_back(lp.logprob);
    json alts = json::object();
    for (uint32_t i = 0; i < k && i < lp.top.size(); ++i)
      alts[tokenizer::token_json_text(tok_.token_bytes(lp.top[i].first))] = lp.top[i].second;
    if (!alts.contains(key)) alts[key] = lp.logprob;
    top.push_back(alts);
    byte_offsets.push_back(before.size() + offset);
  };
  if (with_prompt) {  // echo: the prompt's tokens, the first without a log-probability
    const auto& prompt = req_.prompts[c.prompt];
    const auto& plp = c.seq->prompt_logprobs();
    size_t offset = 0;
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (i == 0 || i > plp.size()) {
        tokens.push_back(tokenizer::token_json_text(tok_.token_bytes(prompt[i])));
        token_lp.push_back(nullptr);
        top.push_back(nullptr);
        byte_offsets.push_back(offset);
      } else {
        add(plp[i - 1], offset);
      }
      offset += tok_.token_bytes(prompt[i]).size();
    }
  }
  for (size_t i = from; i < to; ++i) add(c.logprobs[i], c.offsets[i]);
  // Echoed, the prompt begins c.text; else it goes before it.
  const json offsets = tokenizer::utf8_char_offsets(before + c.text, byte_offsets);
  return {{"tokens", tokens}, {"token_logprobs", token_lp}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json CompletionJob::chat_logprobs_json(const Choice& c, size_t from, size_t to) const {
  // At the first token, each alternative as the reply would begin with it: without the
  // leading space the content leaves out, so that the tokens add up to the content.
  auto entry = [&](uint32_t token, float logprob, bool first) {
    std::string bytes = tok_.token_bytes(token);
    if (first && req_.sampling.options.drop_leading_space && bytes.starts_with(' ')) bytes.erase(0, 1);
    return json{{"token", bytes}, {"logprob", logprob}, {"bytes", std::vector<uint8_t>(bytes.begin(), bytes.end())}};
  };
  json content = json::array();
  const uint32_t k = req_.logprobs.value_or(0);
  for (size_t i = from; i < to; ++i) {
    const TokenLogprob& lp = c.logprobs[i];
    json e = entry(lp.token, lp.logprob, i == 0), top = json::array();
    for (size_t j = 0; top.size() < k && j < lp.top.size(); ++j) {
      // Two tokens that differ only by that space would be one text listed twice.
      json alt = entry(lp.top[j].first, lp.top[j].second, i == 0);
      if (std::none_of(top.begin(), top.end(), [&](const json& t) { return t["token"] == alt["token"]; }))
        top.push_back(std::move(alt));
    }
    e["top_logprobs"] = top;
    content.push_back(e);
  }
  return {{"content", content}, {"refusal", nullptr}};  // OpenAI's schema has both; a model never refuses here
}

json CompletionJob::choice_json(const Choice& c) const {
  json fr = finish_reason(c);
  if (chat_)
    return {{"index", c.index},
            {"message", {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}}},
            {"logprobs", req_.logprobs ? chat_logprobs_json(c, 0, c.logprobs_sent) : json(nullptr)},
            {"finish_reason", fr}};
  return {{"text", c.text},
          {"index", c.index},
          {"logprobs", req_.logprobs ? logprobs_json(c, 0, c.logprobs_sent, req_.echo) : json(nullptr)},
          {"finish_reason", fr}};
}

json CompletionJob::usage() const {
  uint64_t prompt = 0, generated = 0, cached = 0;
  for (const auto& p : req_.prompts) prompt += p.size();
  for (const auto& c : choices_) generated += c.generated;
  // OpenAI's prompt_tokens_details.cached_tokens: of prompt_tokens, those not run again
  // because a slot kept them (the prompt cache) or a sequence copied them from another
  // running the same prompt (this request's other choices too, so it depends on how the
  // choices were scheduled); a prompt counts once, as in prompt_tokens, with the most any of
  // its choices' sequences reused.
  std::vector<uint64_t> kept(req_.prompts.size());
  for (const auto& c : choices_)
    if (c.seq) kept[c.prompt] = std::max<uint64_t>(kept[c.prompt], c.seq->timings().prompt_tokens_cached);
  for (uint64_t k : kept) cached += k;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", generated},
          {"total_tokens", prompt + generated},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::optional<json> CompletionJob::poll_response(std::chrono::milliseconds wait) {
  // Every unfinished choice is read each poll (only the first waits), so that one failing
  // ends the request now rather than after its siblings reach max_tokens.
  bool all_done = true;
  for (auto& c : choices_) {
    if (c.done) continue;
    if (!c.started) begin_text(c);
    std::vector<GenerationStep> steps;
    const bool done = c.seq->wait_steps(steps, all_done ? wait : std::chrono::milliseconds(0));
    for (const auto& s : steps) take_step(c, s, nullptr, nullptr);
    if (!done) {
      all_done = false;
      continue;
    }
    c.done = true;
    release_logprobs(c, true);
    if (auto e = failure(c)) throw *e;
  }
  if (!all_done) return std::nullopt;
  json choices = json::array();
  for (const auto& c : choices_) choices.push_back(choice_json(c));
  return json{{"id", id_},
              {"object", chat_ ? "chat.completion" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", choices},
              {"usage", usage()}};
}

std::optional<json> CompletionJob::response_within(std::chrono::milliseconds budget) {
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + budget;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now());
    if (auto body = poll_response(std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(200))))
      return body;
    if (clock::now() >= end) return std::nullopt;
  }
}

json CompletionJob::chunk(const Choice& c, const std::string& piece, const json& logprobs, const json& finish) const {
  json choice;
  if (chat_) {
    json delta = json::object();
    if (!piece.empty()) delta["content"] = piece;
    choice = {{"index", c.index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}};
  } else {
    choice = {{"text", piece}, {"index", c.index}, {"logprobs", logprobs}, {"finish_reason", finish}};
  }
  json j = {{"id", id_},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({choice})}};
  if (req_.include_usage) j["usage"] = nullptr;  // as OpenAI's: only the last chunk has usage
  return j;
}

// The first event of a choice: the assistant role (chat) or the echoed prompt.
void CompletionJob::start_stream(Choice& c, std::string& out) {
  begin_text(c);
  if (chat_) {
    json first = chunk(c, "", nullptr, nullptr);
    first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
    out += sse(first);
  } else if (req_.echo) {
    // A token-id prompt may end inside a character that the first generated bytes finish:
    // its start waits for them, so that the pieces join to the plain response's text (each
    // chunk alone would show the halves as two U+FFFD).
    const size_t whole = c.text.size() - tokenizer::utf8_incomplete_tail(c.text);
    c.held = c.text.substr(whole);
    out += sse(chunk(c, c.text.substr(0, whole), req_.logprobs ? logprobs_json(c, 0, 0, true) : json(nullptr),
                     nullptr));
  }
}

std::string CompletionJob::with_held(Choice& c, std::string piece) {
  if (c.held.empty()) return piece;
  return std::exchange(c.held, {}) + piece;
}

bool CompletionJob::poll_events(std::string& out, std::chrono::milliseconds wait) {
  if (done_sent_) return true;
  bool all_done = true;
  for (auto& c : choices_) {
    if (c.done) continue;
    std::vector<GenerationStep> steps;
    const bool done = c.seq->wait_steps(steps, wait);
    wait = std::chrono::milliseconds(0);  // one wait per poll; the other choices are only drained
    if ((!steps.empty() || done) && !c.started) start_stream(c, out);
    for (const auto& s : steps) {
      std::string piece;
      json lp = nullptr;
      take_step(c, s, &piece, &lp);
      if (!piece.empty()) piece = with_held(c, std::move(piece));
      if (!piece.empty() || !lp.is_null()) out += sse(chunk(c, piece, lp, nullptr));
    }
    if (done) {
      c.done = true;
      if (auto e = failure(c)) {
        // The stream ends at its first error (OpenAI's clients stop reading there): one
        // error event, not one per choice with the others' chunks between them.
        out += sse(error_body(*e));
        cancel();
        out += "data: [DONE]\n\n";
        done_sent_ = true;
        return true;
      } else {
        out += sse(chunk(c, with_held(c, ""), release_logprobs(c, true), finish_reason(c)));
      }
    }
    all_done = all_done && c.done;
  }
  if (!all_done) return false;
  if (req_.include_usage) {
    json last = chunk(choices_[0], "", nullptr, nullptr);
    last["choices"] = json::array();
    last["usage"] = usage();
    out += sse(last);
  }
  out += "data: [DONE]\n\n";
  done_sent_ = true;
  return true;
}

}  // namespace gptvk::server
