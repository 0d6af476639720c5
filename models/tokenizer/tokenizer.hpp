// GPT-2's byte-level BPE tokenizer: vocabulary + merges files (OpenAI's encoder.json and
// vocab.bpe, or Hugging Face's vocab.json and merges.txt), GPT-2's pre-tokenisation
// pattern, merges by rank with a cache of encoded words, and byte-exact decoding.
// GPT-1's (Hugging Face's openai-gpt vocab.json and merges.txt, told apart by its "</w>"
// word ends: models/tokenizer/vocab_files.hpp) runs through the same class: its text is
// normalized and split as BERT's (models/tokenizer/bert_words.hpp), its words merged by
// models/tokenizer/word_bpe.hpp, and its tokens decode with "</w>" as a space.
//
//   auto tok = gptvk::Tokenizer::load("encoder.json", "vocab.bpe");
//   std::vector<uint32_t> ids = tok.encode("Hello world");   // {15496, 995}
//   std::string text = tok.decode(ids);                      // "Hello world"
//
// Input that is not valid UTF-8 is encoded losslessly: each byte that is not part of a
// valid character becomes its own single-byte token, so decode(encode(x)) == x for any
// bytes x. "<|endoftext|>" in the input is ordinary text unless allow_special is set. A
// model's added tokens (models/tokenizer/added_tokens.hpp) are matched in the text before
// the BPE runs: special ones, like <|endoftext|>, only with allow_special.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/added_tokens.hpp"

namespace gptvk {

class Tokenizer {
 public:
  // Throws InputError "PATH:LINE:COLUMN: cause" for an unreadable or malformed file.
  static Tokenizer load(const std::string& vocab_path, const std::string& merges_path);
  // The same from the files' text held in memory (a GGUF file's tokenizer); the paths only
  // name them in errors. `added`: the vocabulary's added tokens, byte-level vocabularies
  // only (<|endoftext|> is one, special, whether listed or not).
  static Tokenizer from_text(const std::string& vocab_path, std::string_view vocab_json,
                             const std::string& merges_path, std::string_view merges_text,
                             std::span<const AddedToken> added = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // allow_special: "<|endoftext|>" (and any other special added token) in the text becomes
  // its token instead of being encoded as plain text, which is what GPT-2's encoder does.
  // Thread-safe; concurrent calls on one Tokenizer take turns.
  std::vector<uint32_t> encode(std::string_view text, bool allow_special = false) const;
  void encode_append(std::string_view text, std::vector<uint32_t>& out, bool allow_special = false) const;

  // Throws InputError naming the first id that is not below vocab_size().
  std::string decode(std::span<const uint32_t> ids) const;
  void decode_append(std::span<const uint32_t> ids, std::string& out) const;
  // The bytes of one token; throws InputError when id is out of the vocabulary.
  const std::string& token_bytes(uint32_t id) const;

  // A stop string as this tokenizer's generated text can hold it: the string itself for
  // GPT-2, whose text is its tokens' bytes; for GPT-1, whose text is lowercased and split
  // from punctuation, its normalized words joined by spaces ("The End!" -> "the end !"),
  // empty (never matching) when it has none ("\n").
  std::string stop_text(std::string_view stop) const;

  uint32_t vocab_size() const;
  // The id of "<|endoftext|>" (50256 for GPT-2), what --special reads that text as.
  std::optional<uint32_t> eot_id() const;
  // Whether encode's allow_special has anything to read: <|endoftext|> or a special added token.
  bool has_special_tokens() const;
  // Where a document starts and ends: "<|endoftext|>" both, as GPT-2 was trained, unless
  // the model file names its own ids (ModelConfig's start_token_id and end_token_ids),
  // which set_document_ids adds: an empty prompt starts from the file's start id, and
  // generation stops at any of its end ids as well as at "<|endoftext|>" (as llama.cpp
  // does). A start id outside the vocabulary is left out, as the model cannot have been
  // trained to start from it. `start_every_text`: the model file asks for the start id
  // before every text (ModelConfig::start_every_text), which encode_document then adds.
  void set_document_ids(std::optional<uint32_t> start, std::span<const uint32_t> ends,
                        bool start_every_text = false);
  std::optional<uint32_t> start_id() const;
  // A text the model reads as a whole (a prompt, a text to score): encode's ids, after the
  // start id where the model file asks for it.
  std::vector<uint32_t> encode_document(std::string_view text, bool allow_special = false) const;
  std::span<const uint32_t> end_ids() const;
  static constexpr std::string_view kEndOfText = "<|endoftext|>";

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> s);
  void encode_text(std::string_view text, std::vector<uint32_t>& out) const;
  std::unique_ptr<State> s_;
};

// Turns ids into text one id at a time for streamed output, never handing out part of a
// UTF-8 character: a token can end in the middle of one (emoji and CJK are often split
// over two or three tokens), and those bytes wait for the next tokens. Everything fed
// comes back exactly once, so the concatenation of all feed() results and flush() is
// decode(all ids), byte for byte (bytes that can never become valid UTF-8 are passed
// through, not held).
class StreamDecoder {
 public:
  // `tok` must outlive the decoder and stay where it is.
  explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}
  // The bytes that are complete now (maybe none). Throws InputError for an id out of the
  // vocabulary, holding what it held before.
  std::string feed(uint32_t id);
  // The held-back bytes of an unfinished character, if the stream stops there.
  std::string flush();

 private:
  const Tokenizer* tok_;
  std::string pending_;
};

}  // namespace gptvk
