#include "models/snapshot_tokenizer.hpp"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "engine/json_limits.hpp"
#include "models/tokenizer/added_tokens.hpp"
#include "models/tokenizer/vocab_files.hpp"
#include "models/tokenizer_json.hpp"

namespace gptvk {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Whether the folder holds `p`, a dangling or looping link included: opening it then says
// why it cannot be read.
bool has_file(const fs::path& p) { return files::present(p.string(), p.string() + ": "); }

// GPT-1's tokenizer matches no added tokens. Those its vocabulary holds under the same id
// (openai-gpt's "<unk>") add nothing; any other would give other ids than transformers',
// so text is refused, naming it.
void check_gpt1_added_tokens(const std::string& path, const json& added, const std::string& vocab_name,
                             const std::string& vocab_text, ModelConfig& cfg) {
  if (!added.is_array()) throw InputError(path + ": added_tokens: expected an array");
  const std::vector<std::string> tokens =
      tokenizer::parse_vocab(cfg.tokenizer_vocab, vocab_text, tokenizer::Spelling::Utf8);
  for (const json& a : added) {
    const json id = a.is_object() ? a.value("id", json()) : json();
    const json content = a.is_object() ? a.value("content", json()) : json();
    if (id.is_number_unsigned() && id.get<uint64_t>() < tokens.size() && content.is_string() &&
        tokens[id.get<size_t>()] == content.get<std::string>())
      continue;
    cfg.tokenizer_unsupported = path + ": added token " + excerpt(a.dump()) + " is not one of " + vocab_name +
                                "'s tokens, and GPT-1's tokenizer here matches no added tokens";
    return;
  }
}

// tokenizer.json's added_tokens (save_pretrained writes it for a fast tokenizer: GPT-2's
// <|endoftext|>, and any token added since) as the model's added tokens, each given its id
// in the vocabulary `vocab_text` (named `vocab_name` in errors): a token past its ids joins
// it, spelled in the byte alphabet as the vocabulary spells its tokens. Returns the
// vocabulary's text with them. GPT-1's vocabulary, spelled as text, takes none.
std::string with_added_tokens(const std::string& path, const json& t, const std::string& vocab_name,
                              const std::string& vocab_text, ModelConfig& cfg) {
  if (!t.is_object() || !t.contains("added_tokens")) return vocab_text;
  if (tokenizer::vocab_spelling(vocab_text) != tokenizer::Spelling::ByteAlphabet) {
    check_gpt1_added_tokens(path, t["added_tokens"], vocab_name, vocab_text, cfg);
    return vocab_text;
  }
  // The vocabulary's own errors first, as its reader states them (line and column).
  const std::vector<std::string> tokens =
      tokenizer::parse_vocab(cfg.tokenizer_vocab, vocab_text, tokenizer::Spelling::ByteAlphabet);
  json vocab;  // parsed only when a token joins it
  std::map<uint64_t, std::string> added_ids;  // id -> content, of the entries read so far
  const json& added = t["added_tokens"];
  if (!added.is_array()) throw InputError(path + ": added_tokens: expected an array");
  for (const json& a : added) {
    auto flag = [&](const char* key) { return a.contains(key) && !a[key].is_boolean(); };
    const bool id_ok = a.is_object() && a.contains("id") && a["id"].is_number_unsigned() &&
                       a["id"].get<uint64_t>() < cfg.vocab_size;
    if (!id_ok || !a.contains("content") || !a["content"].is_string() || flag("special") || flag("lstrip") ||
        flag("rstrip") || flag("single_word"))
      throw InputError(path + ": added_tokens: " + a.dump().substr(0, 200) +
                       " is not {\"id\": a token id below vocab_size, \"content\": text, \"special\": true or false}");
    if (a.value("single_word", false))
      throw InputError(path + ": added token " + a["content"].dump() + ": single_word is not supported");
    const uint64_t id = a["id"].get<uint64_t>();
    const std::string content = a["content"].get<std::string>();
    if (content.size() > tokenizer::AddedTokenMatcher::kMaxTextBytes)
      throw InputError(path + ": added token " +
                       json(content.substr(0, 64)).dump(-1, ' ', false, json::error_handler_t::replace) + "... is " +
                       std::to_string(content.size()) + " bytes long, more than the " +
                       std::to_string(tokenizer::AddedTokenMatcher::kMaxTextBytes) + " this tokenizer matches");
    if (auto [it, fresh] = added_ids.emplace(id, content); !fresh)
      throw InputError(path + ": added_tokens give id " + std::to_string(id) + " to both " + json(it->second).dump() +
                       " and " + json(content).dump());
    const std::string spelled = tokenizer::byte_alphabet_spelling(content);
    const bool known = id < tokens.size();
    const std::string named = path + ": added token " + json(content).dump() + " has id " + std::to_string(id);
    if (known && tokens[id] != content)  // a token's bytes need not be UTF-8: quoted with U+FFFD for those
      throw InputError(named + ", which " + vocab_name + " gives " + tokenizer::quote_token(tokens[id]));
    if (!known) {
      if (vocab.is_null()) vocab = json::parse(vocab_text);
      if (vocab.contains(spelled))
        throw InputError(named + ", but " + vocab_name + " gives it id " + vocab[spelled].dump());
      vocab[spelled] = id;
    }
    cfg.tokenizer_added.push_back({uint32_t(id), a.value("special", false), a.value("lstrip", false),
                                   a.value("rstrip", false)});
  }
  return vocab.is_null() ? vocab_text : vocab.dump();
}

// The tokenizer of a folder with vocab.json and merges.txt: those files, with tokenizer.json's
// added tokens where it has one. transformers' fast tokenizer runs that tokenizer.json
// itself, so its pipeline must be one gpt-vk runs too.
void read_vocab_and_merges(const fs::path& dir, ModelConfig& cfg) {
  cfg.tokenizer_vocab = (dir / "vocab.json").string();
  cfg.tokenizer_merges = (dir / "merges.txt").string();
  if (!has_file(dir / "tokenizer.json")) return;
  const std::string path = (dir / "tokenizer.json").string();
  const json t = read_json_file(path, files::kMaxTokenizerBytes);
  cfg.tokenizer_unsupported = tokenizer_json_mismatch(path, t);
  if (!cfg.tokenizer_unsupported.empty() || !t.contains("added_tokens")) return;
  const std::string vocab_text = tokenizer::read_file_bytes(cfg.tokenizer_vocab);
  std::string with_added = with_added_tokens(path, t, "vocab.json", vocab_text, cfg);
  if (cfg.tokenizer_added.empty()) return;  // the files as they are
  cfg.tokenizer_vocab_json = std::make_shared<const std::string>(std::move(with_added));
  cfg.tokenizer_merges_text = std::make_shared<const std::string>(tokenizer::read_file_bytes(cfg.tokenizer_merges));
}

// The tokenizer of a folder with tokenizer.json alone (PreTrainedTokenizerFast saves no
// other): the vocabulary and merges of its BPE model, its added tokens; a pipeline gpt-vk
// does not run leaves the model without text, saying why, as a GGUF's other tokenizers do.
void read_tokenizer_json(const fs::path& file, ModelConfig& cfg) {
  const std::string path = file.string();
  const json t = read_json_file(path, files::kMaxTokenizerBytes);
  TokenizerJsonBpe bpe = tokenizer_json_bpe(path, t);
  if (!bpe.unsupported.empty()) {
    cfg.tokenizer_unsupported = bpe.unsupported;
    return;
  }
  cfg.tokenizer_vocab = path + " (model.vocab)";
  cfg.tokenizer_merges = path + " (model.merges)";
  cfg.tokenizer_vocab_json =
      std::make_shared<const std::string>(with_added_tokens(path, t, "model.vocab", bpe.vocab_json, cfg));
  cfg.tokenizer_merges_text = std::make_shared<const std::string>(std::move(bpe.merges_text));
}

// tokenizer_config.json's add_bos_token (transformers' GPT2Tokenizer then starts every
// text with the bos token, and llama.cpp's converter carries it into a GGUF file) and, for
// GPT-2, add_prefix_space, which transformers' GPT-2 tokenizers apply over the tokenizer
// files: true puts a space before every text (and after each added token), which gpt-vk's
// tokenizer does not.
void read_tokenizer_config(const fs::path& file, bool gpt2, ModelConfig& cfg) {
  const json t = read_json_file(file.string(), files::kMaxTokenizerBytes);
  if (!t.is_object()) return;
  const json bos = t.value("add_bos_token", json());
  const json prefix = t.value("add_prefix_space", json());  // null: the tokenizer files decide
  if (!(bos.is_null() || bos.is_boolean()))
    throw InputError(file.string() + ": add_bos_token " + excerpt(bos.dump()) + " is not true or false");
  if (gpt2 && !(prefix.is_null() || prefix == json(false)))
    throw InputError(file.string() + ": add_prefix_space " + excerpt(prefix.dump()) +
                     " is not supported (transformers would put a space before the text)");
  cfg.start_every_text = bos == json(true);
}

void read_tokenizer(const fs::path& dir, bool gpt2, ModelConfig& cfg) {
  // GPT-2's byte-level BPE or GPT-1's, told apart by the vocabulary (models/tokenizer).
  if (has_file(dir / "vocab.json") && has_file(dir / "merges.txt")) read_vocab_and_merges(dir, cfg);
  else if (has_file(dir / "tokenizer.json")) read_tokenizer_json(dir / "tokenizer.json", cfg);
  else return;  // no tokenizer: the text commands say so
  if (cfg.tokenizer_unsupported.empty() && has_file(dir / "tokenizer_config.json"))
    read_tokenizer_config(dir / "tokenizer_config.json", gpt2, cfg);
}

}  // namespace

void read_snapshot_tokenizer(const std::string& dir, bool gpt2, ModelConfig& cfg) {
  // Problems of the tokenizer's files stop the text commands only: transformers' model loads
  // without its tokenizer, and gpt-vk's runs on ids.
  try {
    read_tokenizer(dir, gpt2, cfg);
  } catch (const InputError& e) {
    cfg.tokenizer_unsupported = e.what();
  }
}

}  // namespace gptvk
