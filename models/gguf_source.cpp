#include "models/gguf_source.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "engine/error.hpp"
#include "models/gguf_dequant.hpp"
#include "models/gguf_file.hpp"
#include "models/tokenizer/added_tokens.hpp"

namespace gptvk {

namespace {

bool native_type(uint32_t t, DType& d) {
  if (t == ggml::F32) d = DType::F32;
  else if (t == ggml::F16) d = DType::F16;
  else if (t == ggml::BF16) d = DType::BF16;
  else return false;
  return true;
}

// Whether storage `d` takes a tensor of ggml type `t` as its blocks are (Q8_0, Q4_0).
bool native_blocks(DType d, uint32_t t) {
  return (d == DType::Q8_0 && t == ggml::Q8_0) || (d == DType::Q4_0 && t == ggml::Q4_0);
}

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return s;
}

// Under quantized storage, the token embedding and LM head keep a block type at least as
// precise as the file's: Q8_0 and Q4_0 as they are, the types gpt-vk dequantizes in Q8_0.
// llama-quantize's Q4_0 writes GPT-2's table in Q6_K (Q8_0 where rows are not a multiple of
// 256): a coarser table moves the logits and perplexity far more than the layers' 4-bit
// blocks do (models/README.md). A table in a float type follows the storage asked for.
std::optional<DType> quantized_table_dtype(const GgufFile& f, bool tied) {
  const GgufTensor* table = f.tensor(tied ? "token_embd.weight" : "output.weight");
  if (!table) return std::nullopt;
  if (table->type == ggml::Q4_0) return DType::Q4_0;
  if (ggml_dequantizable(table->type)) return DType::Q8_0;
  return std::nullopt;
}

// Tensors in numpy order (GGUF's ne reversed: ne[0] varies fastest, so a [rows][cols]
// matrix is ne = {cols, rows}); quantized tensors read as F32.
class GgufSource : public MappedTensorSource {
 public:
  explicit GgufSource(GgufFile f) : file_(std::move(f)) {
    for (const GgufTensor& g : file_.tensors()) {
      TensorInfo t;
      t.name = g.name;
      t.dtype_name = ggml::type_name(g.type);
      t.shape.assign(g.ne.rbegin(), g.ne.rend());
      DType d = DType::F32;
      t.supported = g.bytes && (native_type(g.type, d) || ggml_dequantizable(g.type));
      t.dtype = d;
      t.end = g.elements() * dtype_bytes(d);  // the size data() hands out, not the file's
      infos_.emplace(g.name, std::move(t));
    }
  }
  const std::string& path() const override { return file_.path(); }
  std::span<const std::byte> data(const TensorInfo& t) const override {
    const GgufTensor& g = *file_.tensor(t.name);
    DType d;
    if (native_type(g.type, d)) return file_.data(g);
    scratch_.resize(g.elements());
    dequantize_ggml(g.type, file_.data(g).data(), scratch_.data(), g.elements());
    return {reinterpret_cast<const std::byte*>(scratch_.data()), scratch_.size() * 4};
  }
  void release(const TensorInfo&) const override { std::vector<float>().swap(scratch_); }
  std::span<const std::byte> ggml_blocks(const TensorInfo& t, DType want) const override {
    const GgufTensor& g = *file_.tensor(t.name);
    return native_blocks(want, g.type) ? file_.data(g) : std::span<const std::byte>{};
  }
  std::string conversion_note(DType target, DType table) const override {
    std::map<DType, std::set<std::string>> types;  // storage -> the file's types converted to it
    for (const GgufTensor& g : file_.tensors()) {
      const DType to = g.name == "token_embd.weight" || g.name == "output.weight" ? table : target;
      if (ggml_dequantizable(g.type) && !native_blocks(to, g.type)) types[to].insert(ggml::type_name(g.type));
    }
    std::vector<std::string> groups;
    for (const auto& [to, names] : types)
      groups.push_back("its " + joined(std::vector<std::string>(names.begin(), names.end())) + " tensors to " +
                       dtype_name(to));
    return joined(groups);
  }

 private:
  GgufFile file_;
  mutable std::vector<float> scratch_;  // the last dequantized tensor
};

class KeyReader {
 public:
  explicit KeyReader(const GgufFile& f) : f_(f) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(f_.path() + ": metadata " + key + ": " + what);
  }
  const GgufValue& required(const std::string& key) const {
    const GgufValue* v = f_.find(key);
    if (!v) throw InputError(f_.path() + ": missing metadata key " + key);
    return *v;
  }
  uint32_t dim(const std::string& key) const {
    const GgufValue& v = required(key);
    if (!v.is_integer()) fail(key, "expected an integer");
    if (v.i <= 0 || v.i > (int64_t(1) << 24)) fail(key, std::to_string(v.i) + " is out of range (1 .. 16777216)");
    return static_cast<uint32_t>(v.i);
  }
  std::string string(const std::string& key) const {
    const GgufValue& v = required(key);
    if (v.type != GgufType::String) fail(key, "expected a string");
    return v.s;
  }
  const std::vector<std::string_view>& strings(const std::string& key) const {
    const GgufValue& v = required(key);
    if (v.type != GgufType::Array || v.elem_type != GgufType::String) fail(key, "expected an array of strings");
    return v.strings;
  }

 private:
  const GgufFile& f_;
};

// The tokens tokenizer.ggml.token_type marks CONTROL (special) or USER_DEFINED, as
// llama.cpp's converter marks a Hugging Face tokenizer's added tokens, in id order.
std::vector<AddedToken> added_tokens(const GgufFile& f, const KeyReader& k, size_t n_tokens) {
  constexpr double kControl = 3, kUserDefined = 4;  // llama.cpp's llama_token_type
  const GgufValue* types = f.find("tokenizer.ggml.token_type");
  if (!types) return {};
  if (types->type != GgufType::Array || types->elements.empty() || types->count != n_tokens)
    k.fail("tokenizer.ggml.token_type", "expected an array of " + std::to_string(n_tokens) + " numbers, one a token");
  std::vector<AddedToken> added;
  for (size_t i = 0; i < n_tokens; ++i)
    if (const double t = types->number(i); t == kControl || t == kUserDefined)
      added.push_back({uint32_t(i), t == kControl});
  return added;
}

// tokenizer.ggml.* as the text of a vocab.json and a merges.txt, which spell tokens in the
// same byte alphabet GGUF's gpt2 tokenizer does (its added tokens as their text).
// tokenizer.ggml.pre names that split text as GPT-2 does: those llama.cpp's vocabulary
// loader runs with GPT-2's pattern and nothing else added (llama-vocab.cpp), and "default"
// or none (converters before the key), which llama.cpp runs with a generic split of its
// own, warning that quality degrades: GPT-2's is the one a gpt2 model was trained with.
bool splits_as_gpt2(const std::string& pre) {
  static const std::set<std::string> kGpt2Split = {"gpt-2",      "default",    "phi-2",   "jina-es",     "jina-de",
                                                   "gigachat",   "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                                                   "modern-bert", "exaone4"};
  return kGpt2Split.count(pre) != 0;
}

void read_tokenizer(const GgufFile& f, const KeyReader& k, ModelConfig& cfg) {
  if (!f.find("tokenizer.ggml.model")) {  // (a TOML's "[tokenizer] section" would mislead here)
    cfg.tokenizer_unsupported = f.path() + ": no tokenizer in the file (metadata key tokenizer.ggml.model): text "
                                           "commands cannot run; use forward --ids";
    return;
  }
  const std::string model = k.string("tokenizer.ggml.model");
  if (model != "gpt2") {
    cfg.tokenizer_unsupported = f.path() + ": tokenizer.ggml.model is '" + model +
                                "', not GPT-2's byte-level BPE ('gpt2'): text commands cannot run; use forward --ids";
    return;
  }
  // The pre-tokenizer splits text before the merges; another one than GPT-2's (llama3's
  // digit groups, say) would give other ids than the file's own tokenizer.
  if (const GgufValue* pre = f.find("tokenizer.ggml.pre");
      pre && !(pre->type == GgufType::String && splits_as_gpt2(pre->s))) {
    cfg.tokenizer_unsupported = f.path() + ": tokenizer.ggml.pre is " +
                                (pre->type == GgufType::String ? "'" + pre->s + "'" : std::string("not a string")) +
                                ", not GPT-2's pre-tokenizer ('gpt-2'): text commands cannot run; use forward --ids";
    return;
  }
  const auto& tokens = k.strings("tokenizer.ggml.tokens");
  if (tokens.empty()) k.fail("tokenizer.ggml.tokens", "an empty list: a GPT-2 tokenizer has at least its 256 bytes");
  if (tokens.size() > cfg.vocab_size)
    k.fail("tokenizer.ggml.tokens", std::to_string(tokens.size()) + " tokens, more than the " +
                                        std::to_string(cfg.vocab_size) + " rows of token_embd.weight");
  // llama.cpp ends a generation at any of eos, eot and eom (llama_vocab_is_eog).
  for (const char* id_key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                             "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const GgufValue* v = f.find(id_key);
    if (!v) continue;
    if (!v->is_integer() || v->i < 0) k.fail(id_key, "is not a token id (a whole number from 0)");
    // An id past the tokens names none: left out, as llama.cpp carries on past it ("bad
    // special token") and as a snapshot's config.json ids past its vocabulary are.
    if (uint64_t(v->i) >= tokens.size()) continue;
    if (id_key == std::string_view("tokenizer.ggml.bos_token_id")) cfg.start_token_id = uint32_t(v->i);
    else cfg.end_token_ids.push_back(uint32_t(v->i));
  }
  if (const GgufValue* add = f.find("tokenizer.ggml.add_bos_token")) {
    if (add->type != GgufType::Bool) k.fail("tokenizer.ggml.add_bos_token", "expected true or false");
    cfg.start_every_text = add->i != 0;
  }
  cfg.tokenizer_added = added_tokens(f, k, tokens.size());
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0, a = 0; i < tokens.size(); ++i) {
    // An added token is stored as its text, the others in GPT-2's byte alphabet.
    const bool added = a < cfg.tokenizer_added.size() && cfg.tokenizer_added[a].id == i;
    if (added) ++a;
    const std::string spelled = added ? tokenizer::byte_alphabet_spelling(tokens[i]) : std::string(tokens[i]);
    if (vocab.contains(spelled)) k.fail("tokenizer.ggml.tokens", "token '" + excerpt(tokens[i]) + "' is listed twice");
    vocab[spelled] = i;
  }
  try {
    cfg.tokenizer_vocab_json = std::make_shared<const std::string>(vocab.dump());
  } catch (const nlohmann::json::exception&) {
    k.fail("tokenizer.ggml.tokens", "a token is not valid UTF-8");
  }
  // Required, as llama.cpp requires it: without merges every byte would be its own token.
  std::string merges;
  for (std::string_view m : k.strings("tokenizer.ggml.merges")) {
    if (m.find('\n') != std::string::npos) k.fail("tokenizer.ggml.merges", "a merge contains a line break");
    merges.append(m).push_back('\n');
  }
  cfg.tokenizer_merges_text = std::make_shared<const std::string>(std::move(merges));
  cfg.tokenizer_vocab = f.path() + " (tokenizer.ggml.tokens)";
  cfg.tokenizer_merges = f.path() + " (tokenizer.ggml.merges)";
}

}  // namespace

std::map<std::string, std::string> gguf_tensor_names(const std::string& path, const ModelConfig& cfg,
                                                     const std::function<bool(const std::string&)>& has) {
  std::map<std::string, std::string> n;
  n["linear"] = "out_in";  // llama.cpp's converter transposes GPT-2's Conv1D weights
  n["tok_emb"] = "token_embd.weight";
  n["pos_emb"] = "position_embd.weight";
  const std::pair<const char*, const char*> layer[] = {
      {"ln1_weight", "attn_norm.weight"},    {"ln1_bias", "attn_norm.bias"},    {"qkv_weight", "attn_qkv.weight"},
      {"qkv_bias", "attn_qkv.bias"},         {"attn_out_weight", "attn_output.weight"},
      {"attn_out_bias", "attn_output.bias"}, {"ln2_weight", "ffn_norm.weight"}, {"ln2_bias", "ffn_norm.bias"},
      {"fc_weight", "ffn_up.weight"},        {"fc_bias", "ffn_up.bias"},        {"proj_weight", "ffn_down.weight"},
      {"proj_bias", "ffn_down.bias"}};
  for (auto [role, suffix] : layer) {
    const bool bias = std::string(role).find("bias") != std::string::npos && std::string(role) != "ln1_bias" &&
                      std::string(role) != "ln2_bias";
    const bool in_first = has(std::string("blk.0.") + suffix);
    if (bias)
      for (uint32_t l = 1; l < cfg.n_layers; ++l)
        if (has("blk." + std::to_string(l) + "." + suffix) != in_first)
          throw InputError(path + ": tensor 'blk." + std::to_string(in_first ? l : 0) + "." + suffix +
                           "' not found, but 'blk." + std::to_string(in_first ? 0 : l) + "." + suffix +
                           "' is: every layer must hold the same tensors");
    if (std::string(role) == "qkv_bias" ? cfg.qkv_bias : !bias || in_first) n[role] = std::string("blk.{i}.") + suffix;
  }
  if (cfg.final_norm) {
    n["lnf_weight"] = "output_norm.weight";
    n["lnf_bias"] = "output_norm.bias";
  }
  if (!cfg.tie_embeddings) n["head_weight"] = "output.weight";
  return n;
}

namespace {

// llama.cpp refuses a file holding a tensor its graph does not read ("wrong number of
// tensors"), and so does gpt-vk: a separate attn_k beside attn_qkv, say, is a model it would
// run wrongly. Layers past block_count are left to the weights' own check, which names the
// count.
void require_every_tensor_read(const GgufFile& f, const ModelConfig& cfg) {
  std::set<std::string> read, layer_patterns;
  for (const auto& [role, pattern] : cfg.names) {
    if (role == "linear") continue;  // not a tensor: the weights' orientation
    const size_t at = pattern.find("{i}");
    if (at == std::string::npos) read.insert(pattern);
    else layer_patterns.insert(pattern);
    for (uint32_t l = 0; at != std::string::npos && l < cfg.n_layers; ++l)
      read.insert(pattern.substr(0, at) + std::to_string(l) + pattern.substr(at + 3));
  }
  for (const GgufTensor& t : f.tensors()) {
    if (read.count(t.name)) continue;
    // A layer's own tensor past block_count is left to the weights' check, which names the
    // wrong layer count; any other name is not read, whatever its layer.
    const size_t digits = t.name.starts_with("blk.") ? 4 : t.name.size();
    const size_t end = t.name.find_first_not_of("0123456789", digits);
    uint64_t layer = 0;
    const bool numbered = end != digits && end != std::string::npos && (t.name[digits] != '0' || end == digits + 1) &&
                          std::from_chars(t.name.data() + digits, t.name.data() + end, layer).ec == std::errc();
    if (numbered && layer >= cfg.n_layers &&
        layer_patterns.count(t.name.substr(0, digits) + "{i}" + t.name.substr(end)))
      continue;
    throw InputError(f.path() + ": holds tensor '" + t.name +
                     "', which the gpt2 architecture does not read (llama.cpp refuses such a file too)");
  }
}

}  // namespace

std::unique_ptr<TensorSource> open_gguf_source(const std::string& path) {
  return std::make_unique<GgufSource>(GgufFile::open(path));
}

ModelConfig gguf_model_config(const GgufFile& f, DType dtype) {
  KeyReader k(f);
  const std::string arch = k.string("general.architecture");
  if (arch != "gpt2")
    throw InputError(f.path() + ": GGUF architecture '" + arch + "' is not supported (gpt-vk runs 'gpt2')");
  ModelConfig cfg;
  cfg.source = f.path();
  cfg.origin = ModelConfig::Origin::Gguf;
  cfg.name = f.find("general.name") && f.find("general.name")->type == GgufType::String ? f.find("general.name")->s
                                                                                          : "gguf";
  cfg.context_length = k.dim("gpt2.context_length");
  cfg.emb_dim = k.dim("gpt2.embedding_length");
  cfg.n_layers = k.dim("gpt2.block_count");
  // Each layer holds at least 8 tensors (the norms' weights and biases and the four matrices),
  // beside the two embeddings. Checked first, so that a count the file cannot back (up to
  // 2^24 layers) fails at once instead of in per-layer lookups for tensors that are not there.
  if (const uint64_t least = 8 * uint64_t(cfg.n_layers) + 2; least > f.tensors().size())
    k.fail("gpt2.block_count", std::to_string(cfg.n_layers) + " layers need at least " + std::to_string(least) +
                                   " tensors, and the file holds " + std::to_string(f.tensors().size()));
  cfg.ffn_dim = k.dim("gpt2.feed_forward_length");
  cfg.n_heads = k.dim("gpt2.attention.head_count");
  if (cfg.emb_dim % cfg.n_heads)
    k.fail("gpt2.attention.head_count", std::to_string(cfg.n_heads) + " does not divide gpt2.embedding_length");
  if (std::string why = head_dim_limit(cfg); !why.empty()) k.fail("gpt2.attention.head_count", why);
  // Fewer key/value heads than query heads (grouped-query attention) is no GPT-2: a file that
  // says so cannot be run as one (its attn_qkv would not have GPT-2's shape either).
  if (const GgufValue* kv = f.find("gpt2.attention.head_count_kv"); kv && !(kv->is_integer() && kv->i == cfg.n_heads))
    k.fail("gpt2.attention.head_count_kv", "differs from gpt2.attention.head_count (" + std::to_string(cfg.n_heads) +
                                               "): grouped-query attention is not GPT-2's");
  const GgufValue& eps = k.required("gpt2.attention.layer_norm_epsilon");
  const float e = static_cast<float>(eps.f);
  if (eps.type != GgufType::F32 && eps.type != GgufType::F64) k.fail("gpt2.attention.layer_norm_epsilon", "expected a float");
  if (!(e > 0 && e < 1)) k.fail("gpt2.attention.layer_norm_epsilon", "must be in (0, 1)");
  cfg.norm_eps = e;
  cfg.activation = Activation::GeluTanh;  // llama.cpp's gpt2 graph: LLM_FFN_GELU (tanh form)
  const GgufTensor* emb = f.tensor("token_embd.weight");
  if (!emb || emb->ne.size() != 2) throw InputError(f.path() + ": tensor 'token_embd.weight' (2-D) not found");
  if (emb->ne[1] == 0 || emb->ne[1] > kMaxVocab)
    throw InputError(f.path() + ": token_embd.weight has a bad vocabulary size (" + std::to_string(emb->ne[1]) +
                     " rows, 1 to " + std::to_string(kMaxVocab) + " allowed)");
  // Its rows are the vocabulary and its columns the width: checked here, before the
  // tokenizer compares its tokens with the rows, so that swapped dims are said as such.
  if (emb->ne[0] != cfg.emb_dim)
    throw InputError(f.path() + ": token_embd.weight is [" + std::to_string(emb->ne[1]) + "][" +
                     std::to_string(emb->ne[0]) + "], not [vocabulary][" + std::to_string(cfg.emb_dim) +
                     "] (gpt2.embedding_length)");
  cfg.vocab_size = static_cast<uint32_t>(emb->ne[1]);
  cfg.qkv_bias = f.tensor("blk.0.attn_qkv.bias") != nullptr;
  cfg.tie_embeddings = f.tensor("output.weight") == nullptr;
  cfg.out_bias = false;
  cfg.weights_file = f.path();
  cfg.layout = "custom";
  cfg.dtype = dtype;
  if (is_quantized(dtype)) cfg.embedding_dtype = quantized_table_dtype(f, cfg.tie_embeddings);
  cfg.names = gguf_tensor_names(f.path(), cfg, [&](const std::string& name) { return f.tensor(name) != nullptr; });
  require_every_tensor_read(f, cfg);
  read_tokenizer(f, k, cfg);
  return cfg;
}

void check_config_matches_gguf(const ModelConfig& cfg, const std::string& path) {
  const ModelConfig file = gguf_model_config(GgufFile::open(path), cfg.dtype);
  auto differs = [&](const std::string& key, const std::string& ours, const std::string& theirs) {
    throw InputError(cfg.source + ": model." + key + " is " + ours + ", but " + path + " says " + theirs);
  };
  auto check = [&](const char* key, uint32_t ours, uint32_t theirs) {
    if (ours != theirs) differs(key, std::to_string(ours), std::to_string(theirs));
  };
  check("vocab_size", cfg.vocab_size, file.vocab_size);
  check("context_length", cfg.context_length, file.context_length);
  check("emb_dim", cfg.emb_dim, file.emb_dim);
  check("n_heads", cfg.n_heads, file.n_heads);
  check("n_layers", cfg.n_layers, file.n_layers);
  check("ffn_dim", cfg.ffn_dim, file.ffn_dim);
  if (cfg.norm_eps != file.norm_eps) {
    char ours[32], theirs[32];
    std::snprintf(ours, sizeof ours, "%g", double(cfg.norm_eps));
    std::snprintf(theirs, sizeof theirs, "%g", double(file.norm_eps));
    differs("norm_eps", ours, theirs);
  }
  auto flag = [&](const char* key, bool ours, bool theirs, const char* why) {
    if (ours != theirs) differs(key, ours ? "true" : "false", std::string(theirs ? "true" : "false") + why);
  };
  flag("tie_embeddings", cfg.tie_embeddings, file.tie_embeddings,
       file.tie_embeddings ? " (no output.weight)" : " (a separate output.weight)");
  flag("qkv_bias", cfg.qkv_bias, file.qkv_bias, " (blk.0.attn_qkv.bias)");
  flag("out_bias", cfg.out_bias, false, " (llama.cpp's gpt2 head has no bias)");
  flag("final_norm", cfg.final_norm, true, " (output_norm)");
  if (cfg.norm_position != NormPosition::Pre) differs("norm_position", "post", "pre (llama.cpp's gpt2 graph)");
  if (cfg.activation != file.activation) differs("activation", "not gelu_tanh", "gelu_tanh (llama.cpp's gpt2 graph)");
}

DType gguf_native_dtype(const GgufFile& f) {
  const GgufTensor* t = f.tensor("blk.0.attn_qkv.weight");
  if (t && t->type == ggml::Q8_0) return DType::Q8_0;
  if (t && t->type == ggml::Q4_0) return DType::Q4_0;
  return DType::F16;
}

}  // namespace gptvk
