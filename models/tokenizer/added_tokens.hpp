// Tokens added to a vocabulary after its BPE merges were learned (llama.cpp's CONTROL and
// USER_DEFINED token types, transformers' added_tokens, GPT-2's own <|endoftext|>): each is
// matched in the text as a whole before the BPE runs. A special one (a control token such
// as <|endoftext|>) only where the caller allows special tokens (--special); the others
// always.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk {

// An added token of a model's vocabulary, by id: its text is the vocabulary's. lstrip and
// rstrip (transformers'): the match takes the whitespace before / after it along.
struct AddedToken {
  uint32_t id = 0;
  bool special = false;
  bool lstrip = false, rstrip = false;
};

namespace tokenizer {

// Finds the added tokens in a text in one pass over it, leftmost first and the longest
// there (transformers' rule; llama.cpp, which tries the longest token everywhere first,
// differs only where two added tokens overlap), through a trie of their texts.
class AddedTokenMatcher {
 public:
  // The longest text matched. The scan tries a match at every byte and follows it as far as
  // the text agrees with some token, so it costs the text's length times this at worst;
  // transformers' and llama.cpp's added tokens are a few dozen bytes.
  static constexpr size_t kMaxTextBytes = 256;
  // `texts[i]` is added[i]'s text, at most kMaxTextBytes long; empty ones are left out.
  AddedTokenMatcher(std::vector<AddedToken> added, const std::vector<std::string>& texts);
  bool any_plain() const { return any_plain_; }
  bool any_special() const { return any_special_; }
  // Calls `plain` for each stretch of text between matches and `token` for each match, in
  // the order they appear.
  void split(std::string_view text, bool allow_special, const std::function<void(std::string_view)>& plain,
             const std::function<void(uint32_t)>& token) const;

 private:
  static constexpr uint32_t kNone = ~0u;
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> next;  // byte -> node
    uint32_t token = kNone;                          // index into added_ of the token ending here
  };
  uint32_t child(uint32_t node, uint8_t b) const;
  // The longest allowed token starting at text[i]: (index into added_, its length); kNone if none.
  std::pair<uint32_t, size_t> longest_at(std::string_view text, size_t i, bool allow_special) const;

  std::vector<AddedToken> added_;
  std::vector<Node> nodes_;
  std::array<uint32_t, 256> root_;  // the first byte's node
  bool any_plain_ = false, any_special_ = false;
};

// The byte-level vocabulary's spelling of raw bytes (a GGUF file's added tokens are stored
// as their text; its other tokens, like vocab.json's, in GPT-2's byte alphabet).
std::string byte_alphabet_spelling(std::string_view bytes);

}  // namespace tokenizer
}  // namespace gptvk
