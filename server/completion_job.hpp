// One HTTP completion request as it runs: its sequences (n per prompt) in the scheduler and
// the OpenAI response they make, whole (non-streamed) or as server-sent events.
//
// Choice index = prompt index * n + i; choice i of a prompt samples with seed + i (a seed
// given) so that n > 1 gives n different completions, each reproducible alone. Logprobs'
// text_offset values count characters from the start of the prompt, as OpenAI's do.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/scheduler.hpp"
#include "server/openai_request.hpp"

namespace gptvk::server {

// JSON text of a value whose strings may hold bytes that are not UTF-8 (a token can end
// inside a character): those become U+FFFD instead of an exception.
std::string dump(const json& j);

class CompletionJob {
 public:
  // Submits every sequence (QueueFull / ShuttingDown from Scheduler::submit pass through).
  CompletionJob(CompletionRequest request, bool chat, std::string model_name, Scheduler& scheduler,
                const Tokenizer& tok);
  ~CompletionJob();  // cancels what still runs (a vanished client frees its slots at once)

  // Non-streamed: the response body when every sequence is done within `budget`, nullopt
  // while some sequence still runs; ApiError 500 when a sequence failed, 503 when the
  // server's shutdown cancelled it. (Streamed, the same errors are an event of their own.)
  std::optional<json> response_within(std::chrono::milliseconds budget);
  // Streamed: appends to `out` the events of the steps that came within `wait`; returns true
  // when everything, `data: [DONE]` included, is in `out`.
  bool poll_events(std::string& out, std::chrono::milliseconds wait);
  void cancel();

 private:
  struct Choice {
    uint32_t index = 0;
    size_t prompt = 0;
    std::shared_ptr<Sequence> seq;
    std::string text;                      // the response text so far (echoed prompt included)
    std::vector<uint32_t> tokens;          // logged tokens (echoed prompt's included)
    std::vector<TokenLogprob> logprobs;    // one per generated token
    std::vector<size_t> offsets;           // text offset of each generated token
    size_t token_end = 0;                  // text offset after the last token (held-back text included)
    size_t logprobs_sent = 0;              // entries of `logprobs` released (their text is out)
    size_t generated = 0;
    std::string held;  // streamed echo: the prompt's unfinished last character, sent with the next text
    bool started = false, done = false;
  };
  void begin_text(Choice& c);
  std::string with_held(Choice& c, std::string piece);  // piece after the choice's held bytes
  void take_step(Choice& c, const GenerationStep& s, std::string* piece, json* piece_logprobs);
  json release_logprobs(Choice& c, bool finished);
  std::optional<json> poll_response(std::chrono::milliseconds wait);
  json choice_json(const Choice& c) const;
  // Entries [from, to) of a choice's logprobs (with the echoed prompt's before them).
  json logprobs_json(const Choice& c, size_t from, size_t to, bool with_prompt) const;
  // Chat's shape: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
  json chat_logprobs_json(const Choice& c, size_t from, size_t to) const;
  json chunk(const Choice& c, const std::string& piece, const json& logprobs, const json& finish) const;
  json usage() const;
  std::string finish_reason(const Choice& c) const;
  std::optional<ApiError> failure(const Choice& c) const;
  void start_stream(Choice& c, std::string& out);

  CompletionRequest req_;
  const bool chat_;
  const std::string model_, id_;
  const long long created_;
  const Tokenizer& tok_;
  std::vector<Choice> choices_;
  bool done_sent_ = false;
};

}  // namespace gptvk::server
