#include "models/hf_snapshot.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "engine/json_limits.hpp"
#include "models/snapshot_tokenizer.hpp"

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
  json j = read_json_file(path, files::kMaxConfigBytes);
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
  read_snapshot_tokenizer(dir, type == "gpt2", cfg);
  return cfg;
}

namespace {

// The shards a model.safetensors.index.json or pytorch_model.bin.index.json names (its
// weight_map's files, each in the folder), read as one source.
std::unique_ptr<TensorSource> open_sharded(const fs::path& d, const fs::path& index) {
  json j = read_json_file(index.string(), files::kMaxConfigBytes);
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
