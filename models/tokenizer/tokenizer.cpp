#include "models/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "engine/error.hpp"
#include "models/tokenizer/bert_words.hpp"
#include "models/tokenizer/bpe.hpp"
#include "models/tokenizer/pretokenizer.hpp"
#include "models/tokenizer/utf8.hpp"
#include "models/tokenizer/vocab_files.hpp"
#include "models/tokenizer/word_bpe.hpp"

namespace gptvk {

struct Tokenizer::State {
  std::vector<std::string> tokens;  // id -> bytes (GPT-1's with "</w>" as a space)
  std::optional<uint32_t> eot;
  std::optional<uint32_t> start;  // set_document_ids
  bool start_every_text = false;
  std::vector<uint32_t> ends;
  std::optional<tokenizer::AddedTokenMatcher> added;  // byte-level vocabularies
  // The pre-tokenizer's match state and the BPE cache change on every encode (const as
  // it is to callers), so one encode runs at a time.
  std::mutex mu;
  std::optional<tokenizer::Pretokenizer> pre;  // GPT-2's pattern (GPT-1 splits as BERT does)
  std::optional<tokenizer::BpeEncoder> bpe;   // GPT-2's byte-level BPE, or
  std::optional<tokenizer::WordBpe> word_bpe;  // GPT-1's
};

Tokenizer::Tokenizer(std::unique_ptr<State> s) : s_(std::move(s)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& vocab_path, const std::string& merges_path) {
  const std::string vocab = tokenizer::read_file_bytes(vocab_path);  // the vocab's errors first
  const std::string merges = tokenizer::read_file_bytes(merges_path);
  return from_text(vocab_path, vocab, merges_path, merges);
}

namespace {

// The added tokens and their texts, <|endoftext|> among them as a special one.
tokenizer::AddedTokenMatcher added_matcher(const std::vector<std::string>& tokens, std::optional<uint32_t> eot,
                                           std::span<const AddedToken> added, const std::string& vocab_path) {
  std::vector<AddedToken> all(added.begin(), added.end());
  if (eot && std::none_of(added.begin(), added.end(), [&](const AddedToken& a) { return a.id == *eot; }))
    all.push_back({*eot, true});
  std::vector<std::string> texts;
  for (const AddedToken& a : all) {
    if (a.id >= tokens.size())
      throw InputError(vocab_path + ": added token " + std::to_string(a.id) + " is outside the vocabulary of " +
                       std::to_string(tokens.size()));
    if (tokens[a.id].size() > tokenizer::AddedTokenMatcher::kMaxTextBytes)
      throw InputError(vocab_path + ": added token " + std::to_string(a.id) + " is " +
                       std::to_string(tokens[a.id].size()) + " bytes long, more than the " +
                       std::to_string(tokenizer::AddedTokenMatcher::kMaxTextBytes) + " this tokenizer matches: " +
                       excerpt(tokens[a.id]));
    texts.push_back(tokens[a.id]);
  }
  return tokenizer::AddedTokenMatcher(std::move(all), texts);
}

// GPT-1's tokens as text: the end-of-word mark is the space that follows the word.
void spell_word_ends(std::vector<std::string>& tokens) {
  constexpr std::string_view eow = tokenizer::WordBpe::kEndOfWord;
  for (std::string& t : tokens)
    if (t.ends_with(eow)) t.replace(t.size() - eow.size(), eow.size(), " ");
}

}  // namespace

Tokenizer Tokenizer::from_text(const std::string& vocab_path, std::string_view vocab_json,
                               const std::string& merges_path, std::string_view merges_text,
                               std::span<const AddedToken> added) {
  auto s = std::make_unique<State>();
  const tokenizer::Spelling spelling = tokenizer::vocab_spelling(vocab_json);
  s->tokens = tokenizer::parse_vocab(vocab_path, vocab_json, spelling);
  std::unordered_map<std::string, uint32_t> ids;
  ids.reserve(s->tokens.size());
  for (uint32_t id = 0; id < s->tokens.size(); ++id) ids.emplace(s->tokens[id], id);
  if (spelling == tokenizer::Spelling::Utf8) {
    auto merges = tokenizer::parse_merges(merges_path, merges_text, ids, spelling);
    s->word_bpe.emplace(merges, std::move(ids), vocab_path);
    spell_word_ends(s->tokens);
    return Tokenizer(std::move(s));
  }

  std::array<uint32_t, 256> byte_ids;
  for (int b = 0; b < 256; ++b) {
    auto it = ids.find(std::string(1, char(b)));
    if (it == ids.end()) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02X", b);
      throw InputError(vocab_path + ": no token for the single byte " + buf +
                       " (a byte-level vocabulary needs all 256)");
    }
    byte_ids[b] = it->second;
  }
  if (auto it = ids.find(std::string(kEndOfText)); it != ids.end()) {
    s->eot = s->start = it->second;
    s->ends = {it->second};
  }
  s->added.emplace(added_matcher(s->tokens, s->eot, added, vocab_path));
  s->bpe.emplace(tokenizer::parse_merges(merges_path, merges_text, ids), byte_ids);
  s->pre.emplace();
  return Tokenizer(std::move(s));
}

uint32_t Tokenizer::vocab_size() const { return uint32_t(s_->tokens.size()); }

std::string Tokenizer::stop_text(std::string_view stop) const {
  if (!s_->word_bpe) return std::string(stop);
  std::string out;
  tokenizer::for_each_bert_word(stop, [&](std::string_view word) {
    if (!out.empty()) out += ' ';
    out += word;
  });
  return out;
}
std::optional<uint32_t> Tokenizer::eot_id() const { return s_->eot; }
bool Tokenizer::has_special_tokens() const { return s_->added && s_->added->any_special(); }
std::optional<uint32_t> Tokenizer::start_id() const { return s_->start; }
std::span<const uint32_t> Tokenizer::end_ids() const { return s_->ends; }

void Tokenizer::set_document_ids(std::optional<uint32_t> start, std::span<const uint32_t> ends,
                                 bool start_every_text) {
  if (start && *start < s_->tokens.size()) s_->start = start;  // its text starts an empty prompt's echo
  s_->start_every_text = start_every_text;
  for (uint32_t id : ends)
    if (std::find(s_->ends.begin(), s_->ends.end(), id) == s_->ends.end()) s_->ends.push_back(id);
}

std::vector<uint32_t> Tokenizer::encode_document(std::string_view text, bool allow_special) const {
  std::vector<uint32_t> out;
  if (s_->start_every_text && s_->start) out.push_back(*s_->start);
  encode_append(text, out, allow_special);
  return out;
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 16);
  encode_append(text, out, allow_special);
  return out;
}

void Tokenizer::encode_append(std::string_view text, std::vector<uint32_t>& out, bool allow_special) const {
  std::lock_guard lock(s_->mu);
  if (!s_->added || !(s_->added->any_plain() || (allow_special && s_->added->any_special()))) {
    encode_text(text, out);
    return;
  }
  // Text between the added tokens is encoded as usual (so a word right before
  // "<|endoftext|>" ends there, as in tiktoken's allowed_special).
  s_->added->split(
      text, allow_special, [&](std::string_view part) { encode_text(part, out); },
      [&](uint32_t id) { out.push_back(id); });
}

void Tokenizer::encode_text(std::string_view text, std::vector<uint32_t>& out) const {
  if (s_->word_bpe) {
    tokenizer::for_each_bert_word(text, [&](std::string_view word) { s_->word_bpe->encode(word, out); });
    return;
  }
  auto& bpe = *s_->bpe;
  s_->pre->split(text, [&](std::string_view piece) { bpe.encode(piece, out); });
}

const std::string& Tokenizer::token_bytes(uint32_t id) const {
  if (id >= s_->tokens.size())
    throw InputError("token id " + std::to_string(id) + " is outside the vocabulary (ids are 0.." +
                     std::to_string(s_->tokens.size() - 1) + ")");
  return s_->tokens[id];
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  decode_append(ids, out);
  return out;
}

void Tokenizer::decode_append(std::span<const uint32_t> ids, std::string& out) const {
  for (uint32_t id : ids) out += token_bytes(id);
}

std::string StreamDecoder::feed(uint32_t id) {
  pending_ += tok_->token_bytes(id);
  size_t keep = tokenizer::utf8_incomplete_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ready;
}

std::string StreamDecoder::flush() { return std::exchange(pending_, std::string()); }

}  // namespace gptvk
