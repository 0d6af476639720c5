#include "models/hf_snapshot.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

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

class ConfigJson {
 public:
  ConfigJson(std::string path, const json& j) : path_(std::move(path)), j_(j) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(path_ + ": " + key + ": " + what);
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  uint32_t dim(const std::string& key) const {
    if (!has(key)) throw InputError(path_ + ": missing key " + key);
    const json& v = j_.at(key);
    if (!v.is_number_integer()) fail(key, "expected an integer");
    // Read by its own sign: an unsigned value past 2^63 read as int64_t is negative.
    constexpr uint64_t kMax = uint64_t(1) << 24;
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= kMax
                                                 : v.get<int64_t>() >= 1 && v.get<int64_t>() <= int64_t(kMax);
    if (!in_range) fail(key, v.dump() + " is out of range (1 .. 16777216)");
    return v.get<uint32_t>();
  }
  uint32_t dim_or(const std::string& key, uint32_t fallback) const { return has(key) ? dim(key) : fallback; }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail(key, "expected a string");
    return j_.at(key).get<std::string>();
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "expected true or false");
    return j_.at(key).get<bool>();
  }
  float eps_or(const std::string& key, float fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_number()) fail(key, "expected a number");
    const double d = j_.at(key).get<double>();
    if (!(std::isfinite(d) && d > 0)) fail(key, "must be a positive number");
    const float e = static_cast<float>(d);
    if (!std::isfinite(e) || e == 0)
      fail(key, j_.at(key).dump() + " is outside the range of a float (about 1e-38 to 3e38)");
    return e;
  }
  // The token ids of `key`, one or a list (transformers' eos_token_id may be either), less
  // those at or past `vocab`: GPT2Config's defaults name 50256 whatever the vocabulary,
  // and a token the model cannot produce never ends its text (llama.cpp too carries on).
  std::vector<uint32_t> token_ids(const std::string& key, uint32_t vocab) const {
    if (!has(key)) return {};
    const json& v = j_.at(key);
    const json list = v.is_array() ? v : json::array({v});
    std::vector<uint32_t> ids;
    for (const json& id : list) {
      if (!id.is_number_unsigned()) fail(key, id.dump() + " is not a token id (a whole number from 0)");
      if (id.get<uint64_t>() < vocab) ids.push_back(id.get<uint32_t>());
    }
    return ids;
  }
  Activation activation(const std::string& key, const std::string& fallback) const {
    const std::string a = string_or(key, fallback);
    // transformers' ACT2FN: gelu_new, gelu_fast and gelu_pytorch_tanh are the tanh form;
    // openai-gpt's own table maps "gelu" to gelu_new too (see the caller).
    if (a == "gelu_new" || a == "gelu_fast" || a == "gelu_pytorch_tanh") return Activation::GeluTanh;
    if (a == "gelu") return Activation::GeluErf;
    if (a == "relu") return Activation::Relu;
    fail(key, "activation '" + a + "' is not supported (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu or relu)");
  }

 private:
  std::string path_;
  const json& j_;
};

// Whether the folder holds `p`, a dangling or looping link included: opening it then says
// why it cannot be read.
bool present(const fs::path& p) { return files::present(p.string(), p.string() + ": "); }

// A weights file of the folder; a folder in its place is not opened as a snapshot of its own.
std::unique_ptr<TensorSource> open_weights_file(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw InputError(p.string() + ": a folder, not a weights file");
  return open_tensor_source(p.string());
}

json read_json(const std::string& path, uint64_t max_bytes = files::kMaxConfigBytes) {
  const std::string text = tokenizer::read_file_bytes(path, max_bytes);
  if (auto breach = json_limit_breach(text)) throw InputError(path + ": the JSON " + *breach);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // nlohmann's message ends with the token it last read, which can be the whole file.
    throw InputError(path + ": malformed JSON: " + excerpt(e.what(), 240));
  }
}

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
      throw InputError(named + ", which " + vocab_name + " gives " +
                       excerpt(json(tokens[id]).dump(-1, ' ', false, json::error_handler_t::replace)));
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

// The tokenizer of a folder with vocab.json and merges.txt: those files, and tokenizer.json's
// added tokens where it has one.
void read_tokenizer_files(const fs::path& dir, ModelConfig& cfg) {
  cfg.tokenizer_vocab = (dir / "vocab.json").string();
  cfg.tokenizer_merges = (dir / "merges.txt").string();
  if (!present(dir / "tokenizer.json")) return;
  const std::string path = (dir / "tokenizer.json").string();
  const json t = read_json(path, files::kMaxTokenizerBytes);
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
  const json t = read_json(path, files::kMaxTokenizerBytes);
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

// tokenizer_config.json's add_bos_token (transformers then starts every text with the bos
// token) and add_prefix_space, which transformers' GPT-2 tokenizers apply over the tokenizer
// files: true puts a space before every text (and after each added token), which gpt-vk's
// tokenizer does not, so text is refused, saying why; so it is where the file cannot be read
// (transformers' tokenizer would not load, its model would).
void read_tokenizer_config(const fs::path& file, ModelConfig& cfg) {
  if (!cfg.tokenizer_unsupported.empty()) return;
  json t;
  try {
    t = read_json(file.string(), files::kMaxTokenizerBytes);
  } catch (const InputError& e) {
    cfg.tokenizer_unsupported = e.what();
    return;
  }
  if (!t.is_object()) return;
  const json bos = t.value("add_bos_token", json());
  const json prefix = t.value("add_prefix_space", json());  // null: the tokenizer files decide
  if (!(bos.is_null() || bos.is_boolean()))
    cfg.tokenizer_unsupported = file.string() + ": add_bos_token " + excerpt(bos.dump()) + " is not true or false";
  else if (!(prefix.is_null() || prefix == json(false)))
    cfg.tokenizer_unsupported = file.string() + ": add_prefix_space " + excerpt(prefix.dump()) +
                                " is not supported (transformers would put a space before the text)";
  cfg.start_every_text = bos == json(true);
}

void read_gpt2(const ConfigJson& c, ModelConfig& cfg) {
  cfg.vocab_size = c.dim("vocab_size");
  // n_positions is HF's own key (n_ctx an older alias): the one to name when both are absent.
  cfg.context_length = c.has("n_ctx") && !c.has("n_positions") ? c.dim("n_ctx") : c.dim("n_positions");
  cfg.emb_dim = c.dim("n_embd");
  cfg.n_layers = c.dim("n_layer");
  cfg.n_heads = c.dim("n_head");
  cfg.ffn_dim = c.dim_or("n_inner", 4 * cfg.emb_dim);
  cfg.activation = c.activation("activation_function", "gelu_new");
  cfg.norm_eps = c.eps_or("layer_norm_epsilon", 1e-5f);
  cfg.tie_embeddings = c.boolean_or("tie_word_embeddings", true);
  if (!c.boolean_or("scale_attn_weights", true)) c.fail("scale_attn_weights", "false is not supported");
  if (c.boolean_or("scale_attn_by_inverse_layer_idx", false))
    c.fail("scale_attn_by_inverse_layer_idx", "true is not supported");
  cfg.layout = "hf-gpt2";
}

// GPT-1 as transformers' OpenAIGPTModel: post-LN blocks, no final LayerNorm, a head tied
// unless tie_word_embeddings is false, Conv1D (in_out) weights.
void read_openai_gpt(const ConfigJson& c, ModelConfig& cfg) {
  cfg.vocab_size = c.dim("vocab_size");
  cfg.context_length = c.dim("n_positions");
  cfg.emb_dim = c.dim("n_embd");
  cfg.n_layers = c.dim("n_layer");
  cfg.n_heads = c.dim("n_head");
  cfg.ffn_dim = 4 * cfg.emb_dim;
  const std::string afn = c.string_or("afn", "gelu");
  // modeling_openai.py's ACT_FNS: "gelu" is gelu_new (the tanh form), unlike ACT2FN.
  if (afn == "gelu") cfg.activation = Activation::GeluTanh;
  else if (afn == "relu") cfg.activation = Activation::Relu;
  else c.fail("afn", "activation '" + afn + "' is not supported (gelu or relu)");
  cfg.norm_eps = c.eps_or("layer_norm_epsilon", 1e-5f);
  cfg.norm_position = NormPosition::Post;
  cfg.final_norm = false;
  // OpenAIGPTLMHeadModel ties its head unless told not to; then lm_head.weight is the head.
  cfg.tie_embeddings = c.boolean_or("tie_word_embeddings", true);
  cfg.layout = "custom";
  auto& n = cfg.names;
  if (!cfg.tie_embeddings) n["head_weight"] = "lm_head.weight";
  n["linear"] = "in_out";
  n["tok_emb"] = "tokens_embed.weight";
  n["pos_emb"] = "positions_embed.weight";
  for (auto [role, name] : {std::pair{"qkv_weight", "attn.c_attn.weight"}, {"qkv_bias", "attn.c_attn.bias"},
                            {"attn_out_weight", "attn.c_proj.weight"}, {"attn_out_bias", "attn.c_proj.bias"},
                            {"ln1_weight", "ln_1.weight"}, {"ln1_bias", "ln_1.bias"},
                            {"fc_weight", "mlp.c_fc.weight"}, {"fc_bias", "mlp.c_fc.bias"},
                            {"proj_weight", "mlp.c_proj.weight"}, {"proj_bias", "mlp.c_proj.bias"},
                            {"ln2_weight", "ln_2.weight"}, {"ln2_bias", "ln_2.bias"}})
    n[role] = std::string("h.{i}.") + name;
}

}  // namespace

ModelConfig snapshot_model_config(const std::string& dir, DType dtype) {
  const std::string path = (fs::path(dir) / "config.json").string();
  json j = read_json(path);
  if (!j.is_object()) throw InputError(path + ": not a JSON object");
  ConfigJson c(path, j);
  ModelConfig cfg;
  cfg.source = path;
  cfg.origin = ModelConfig::Origin::Snapshot;
  const std::string type = c.string_or("model_type", "");
  // The folder's name as given, also for "." or "models/gpt2/" (made absolute first: the
  // relative "." has no name of its own); links are not followed, so a link's name counts.
  std::error_code ec;
  fs::path named = fs::absolute(dir, ec).lexically_normal();
  if (named.empty()) named = fs::path(dir).lexically_normal();
  cfg.name = named.filename().string();
  if (cfg.name.empty()) cfg.name = named.parent_path().filename().string();
  if (type == "gpt2") read_gpt2(c, cfg);
  else if (type == "openai-gpt") read_openai_gpt(c, cfg);
  else
    c.fail("model_type", type.empty() ? "missing" : json(type).dump() + " is not supported (gpt2 or openai-gpt)");
  if (cfg.emb_dim % cfg.n_heads) c.fail("n_head", std::to_string(cfg.n_heads) + " does not divide n_embd");
  if (std::string why = head_dim_limit(cfg); !why.empty()) c.fail("n_head", why);
  if (std::string why = vocab_limit(cfg); !why.empty()) c.fail("vocab_size", why);
  if (c.has("bos_token_id") && j["bos_token_id"].is_array()) c.fail("bos_token_id", "expected one token id");
  if (auto bos = c.token_ids("bos_token_id", cfg.vocab_size); !bos.empty()) cfg.start_token_id = bos[0];
  cfg.end_token_ids = c.token_ids("eos_token_id", cfg.vocab_size);
  cfg.weights_file = dir;
  cfg.dtype = dtype;
  // GPT-2's byte-level BPE or GPT-1's, told apart by the vocabulary (models/tokenizer).
  if (present(fs::path(dir) / "vocab.json") && present(fs::path(dir) / "merges.txt"))
    read_tokenizer_files(dir, cfg);
  else if (present(fs::path(dir) / "tokenizer.json"))
    read_tokenizer_json(fs::path(dir) / "tokenizer.json", cfg);
  if (present(fs::path(dir) / "tokenizer_config.json"))
    read_tokenizer_config(fs::path(dir) / "tokenizer_config.json", cfg);
  return cfg;
}

namespace {

// The shards a model.safetensors.index.json or pytorch_model.bin.index.json names (its
// weight_map's files, each in the folder), read as one source.
std::unique_ptr<TensorSource> open_sharded(const fs::path& d, const fs::path& index) {
  json j = read_json(index.string());
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw InputError(index.string() + ": no weight_map object");
  std::set<std::string> shards;
  for (auto& [name, file] : j["weight_map"].items()) {
    // Names and values quoted in part: an index can hold megabytes of either.
    const std::string entry = index.string() + ": weight_map['" + excerpt(name) + "']";
    if (!file.is_string()) throw InputError(entry + " is not a file name");
    const std::string f = file.get<std::string>();
    // Opened as a C string, a name with a NUL would open the name cut there.
    if (f.find('\0') != std::string::npos)
      throw InputError(entry + " = " + excerpt(file.dump()) + " holds a NUL byte: not a file name");
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      throw InputError(entry + " = '" + excerpt(f) + "' is not a file in the folder");
    shards.insert(f);
  }
  if (shards.empty()) throw InputError(index.string() + ": weight_map is empty");
  std::vector<std::unique_ptr<TensorSource>> parts;
  for (const std::string& s : shards) {
    if (!present(d / s)) throw InputError(index.string() + ": shard " + excerpt(s) + " is not in the folder");
    parts.push_back(open_weights_file(d / s));
  }
  return joined_source(d.string(), std::move(parts));
}

}  // namespace

// safetensors before torch.save files, as transformers' from_pretrained prefers them; each
// whole or sharded (save_pretrained shards past 5 GB: GPT-2 XL in f32 with
// safe_serialization=False is two pytorch_model-0000N-of-00002.bin files).
std::unique_ptr<TensorSource> open_snapshot_weights(const std::string& dir) {
  const fs::path d(dir);
  for (const char* stem : {"model.safetensors", "pytorch_model.bin"}) {
    if (present(d / stem)) return open_weights_file(d / stem);
    if (const fs::path index = d / (std::string(stem) + ".index.json"); present(index)) return open_sharded(d, index);
  }
  throw InputError(dir + ": no model.safetensors, pytorch_model.bin or their .index.json in the folder");
}

}  // namespace gptvk
