// GPT-1's pre-tokenisation, as Hugging Face's fast "openai-gpt" tokenizer runs it (the Rust
// `tokenizers` crate's BertNormalizer with lowercase, then BertPreTokenizer):
//   1. drop NUL, U+FFFD and the "other" characters (Cc, Cf, Cn, Co, Cs) except TAB, LF and
//      CR; turn every whitespace character into a space;
//   2. put spaces around CJK ideographs (the crate's ranges), so each is a word;
//   3. decompose (NFD) and drop the non-spacing marks: "café" -> "cafe";
//   4. lowercase each character on its own (no final-sigma rule);
//   5. split at spaces, and make each punctuation character (ASCII punctuation, which
//      includes $+<=>^`|~, or Unicode category P*) a word of its own.
// Bytes that are not valid UTF-8 are dropped, as the U+FFFD a decoder would put there is.
// Character properties come from ICU; the crate's own tables are older (Unicode 9 for
// "other"), so characters assigned since then are kept here where the crate drops them.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk::tokenizer {

// Calls word() with each word of `text`, normalized as above, as UTF-8, in order. Long
// text is taken in pieces of about 64 KiB cut at ASCII whitespace (always a word break, and
// never inside a character or between a letter and its marks), so memory stays small.
void for_each_bert_word(std::string_view text, const std::function<void(std::string_view)>& word);

// The same words in a list.
std::vector<std::string> bert_words(std::string_view text);

}  // namespace gptvk::tokenizer
