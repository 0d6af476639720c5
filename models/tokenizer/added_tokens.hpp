// Tokens added to a vocabulary after its BPE merges were learned (llama.cpp's CONTROL and
// USER_DEFINED token types, transformers' added_tokens, GPT-2's own <|endoftext|>): each is
// matched in the text as a whole before the BPE runs, as llama.cpp's tokenizer and
// transformers' do. A special one (a control token such as <|endoftext|>) only where the
// caller allows special tokens (--special); the others always.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk {

// An added token of a model's vocabulary, by id: its text is the vocabulary's.
struct AddedToken {
  uint32_t id = 0;
  bool special = false;
};

namespace tokenizer {

struct AddedText {
  uint32_t id = 0;
  std::string text;
  bool special = false;
};

// The order split_on_added takes them in: longest text first, then lowest id.
void sort_longest_first(std::vector<AddedText>& added);

// Splits `text` on the added tokens' texts (sorted by sort_longest_first), as llama.cpp
// partitions it: each token in turn splits the stretches the ones before it left, so a
// longer token wins over a shorter one inside it. Calls `plain` for each stretch of text
// between matches and `token` for each match, in the order they appear.
void split_on_added(std::string_view text, std::span<const AddedText> added, bool allow_special,
                    const std::function<void(std::string_view)>& plain, const std::function<void(uint32_t)>& token);

// The byte-level vocabulary's spelling of raw bytes (a GGUF file's added tokens are stored
// as their text; its other tokens, like vocab.json's, in GPT-2's byte alphabet).
std::string byte_alphabet_spelling(std::string_view bytes);

}  // namespace tokenizer
}  // namespace gptvk
