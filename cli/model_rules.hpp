// Rules a model run checks before any output.
//
// The one context rule every command that generates or scores follows (cli/README.md, "Context"):
// prompt tokens + generated tokens <= context_length, and a prompt leaves room for at least
// one generated token. The last generated token is never fed back, so a full context has
// fed prompt + generated - 1 positions.
#pragma once
#include <cstdint>
#include <string>

#include "engine/error.hpp"
#include "models/config.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace gptvk::cli {

// InputError unless `prompt` tokens and at least `generated` (>= 1) generated tokens fit.
// `prompt_what` names where the prompt came from in the message ("the prompt", "--prompt-tokens 70").
inline void require_context_room(uint64_t prompt, uint64_t generated, uint32_t context, const std::string& prompt_what) {
  if (prompt + generated <= context) return;
  if (generated == 0)
    throw InputError(prompt_what + " is " + std::to_string(prompt) + " tokens, more than the model's context of " +
                     std::to_string(context) + " tokens");
  throw InputError(prompt_what + " is " + std::to_string(prompt) + " token" + (prompt == 1 ? "" : "s") + "; with " +
                   std::to_string(generated) +
                   " generated token" + (generated == 1 ? "" : "s") + " that exceeds the model's context of " +
                   std::to_string(context) + " tokens (prompt + generated <= context)");
}

// The tokenizer and the model must agree on the vocabulary: a model with more ids than
// the tokenizer could sample an id that has no text, one with fewer could be fed ids past
// its embedding. (No padding rule: the sampler would have to mask the padding ids.)
inline void require_tokenizer_fits(const Tokenizer& tok, const ModelConfig& cfg) {
  if (tok.vocab_size() == cfg.vocab_size) return;
  throw InputError(cfg.source + ": the tokenizer (" + cfg.tokenizer_vocab + ") has " +
                   std::to_string(tok.vocab_size()) + " tokens but model.vocab_size is " +
                   std::to_string(cfg.vocab_size));
}

// --special reads <|endoftext|> (and a model's other special tokens) in the text as tokens:
// refused where there is none (GPT-1's vocabulary), rather than ignored.
inline void require_special_token(const Tokenizer& tok, bool special) {
  if (special && !tok.has_special_tokens())
    throw UsageError("--special: this vocabulary has no special tokens (no <|endoftext|>)");
}

}  // namespace gptvk::cli
