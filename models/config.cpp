// The TOML model config (CONTRACT "Model config (TOML)"): parsed with toml++, every key
// checked for presence, type and value, every table for unknown keys, so that a typo in a
// config is a one-line error naming the file, line and key instead of a silent default.
#include "models/config.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>
#include <vector>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/toml_prescan.hpp"

namespace gptvk {

namespace {

namespace fs = std::filesystem;

// Largest accepted dimension: keeps every product the engine forms (3C, V*C row counts)
// inside uint32 row/column counts.
constexpr int64_t kMaxDim = int64_t(1) << 24;

// Per-layer roles in [weights.names]: their patterns must contain "{i}".
const std::set<std::string> kLayerRoles = {"ln1_weight",      "ln1_bias",      "qkv_weight", "qkv_bias", "q_weight",
                                           "q_bias",          "k_weight",      "k_bias",     "v_weight", "v_bias",
                                           "attn_out_weight", "attn_out_bias", "ln2_weight", "ln2_bias", "fc_weight",
                                           "fc_bias",         "proj_weight",   "proj_bias"};
// Whole-model roles: their patterns must not contain "{i}".
const std::set<std::string> kGlobalRoles = {"tok_emb", "pos_emb", "lnf_weight", "lnf_bias", "head_weight", "head_bias"};

// Reads one table of the document, remembering which keys were consumed so the rest can be
// reported as unknown. Every error message starts with "<file>[:<line>]: <table>.<key>".
class TableReader {
 public:
  TableReader(const std::string& file, const std::string& prefix, const toml::table* table)
      : file_(file), prefix_(prefix), table_(table) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(where(key) + ": " + prefix_ + "." + key + ": " + what);
  }

  const toml::node* node(const std::string& key) {
    seen_.insert(key);
    return table_ ? table_->get(key) : nullptr;
  }

  std::optional<int64_t> integer(const std::string& key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_integer()) fail(key, std::string("expected an integer, got ") + type_name(*n));
    return n->as_integer()->get();
  }

  // A dimension: a positive integer no larger than kMaxDim.
  std::optional<uint32_t> dim(const std::string& key) {
    auto v = integer(key);
    if (!v) return std::nullopt;
    if (*v <= 0) fail(key, "must be a positive integer, got " + std::to_string(*v));
    if (*v > kMaxDim) fail(key, std::to_string(*v) + " is too large (at most " + std::to_string(kMaxDim) + ")");
    return static_cast<uint32_t>(*v);
  }

  uint32_t required_dim(const std::string& key) {
    auto v = dim(key);
    if (!v) missing(key);
    return *v;
  }

  std::optional<bool> boolean(const std::string& key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) fail(key, std::string("expected true or false, got ") + type_name(*n));
    return n->as_boolean()->get();
  }

  std::optional<double> number(const std::string& key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (n->is_floating_point()) return n->as_floating_point()->get();
    if (n->is_integer()) return static_cast<double>(n->as_integer()->get());
    fail(key, std::string("expected a number, got ") + type_name(*n));
  }

  std::optional<std::string> string(const std::string& key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) fail(key, std::string("expected a string, got ") + type_name(*n));
    std::string s = n->as_string()->get();
    if (s.empty()) fail(key, "must not be empty");
    return s;
  }

  std::string required_string(const std::string& key) {
    auto v = string(key);
    if (!v) missing(key);
    return *v;
  }

  // A file's path: opened as a C string, one holding a NUL ("\u0000") would open the path
  // cut there, another file.
  std::string required_path(const std::string& key) {
    std::string v = required_string(key);
    if (v.empty()) fail(key, "an empty path");
    if (v.find('\0') != std::string::npos) fail(key, "the path holds a NUL byte");
    return v;
  }

  // A string that must be one of `allowed`.
  std::optional<std::string> choice(const std::string& key, const std::vector<std::string>& allowed) {
    auto v = string(key);
    if (!v) return std::nullopt;
    for (const auto& a : allowed)
      if (*v == a) return v;
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i)
      list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
    fail(key, "unknown value '" + *v + "' (expected " + list + ")");
  }

  [[noreturn]] void missing(const std::string& key) const {
    throw InputError(file_ + ": missing required key " + prefix_ + "." + key);
  }

  // Call after reading every known key: any key not read is a typo or an unsupported option.
  void reject_unknown() const {
    if (!table_) return;
    for (auto&& [k, v] : *table_)
      if (!seen_.count(std::string(k.str())))
        throw InputError(where(std::string(k.str())) + ": unknown key " + prefix_ + "." + excerpt(k.str()));
  }

 private:
  std::string where(const std::string& key) const {
    const toml::node* n = table_ ? table_->get(key) : nullptr;
    if (n && n->source().begin.line) return file_ + ":" + std::to_string(n->source().begin.line);
    return file_;
  }
  static const char* type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a float";
      case toml::node_type::boolean:
        return "a boolean";
      default:
        return "a date/time";
    }
  }

  std::string file_, prefix_;
  const toml::table* table_;
  std::set<std::string> seen_;
};

// A sub-table of `parent`; a key that exists but is not a table is a type error.
const toml::table* subtable(TableReader& parent, const std::string& key) {
  const toml::node* n = parent.node(key);
  if (!n) return nullptr;
  if (!n->is_table()) parent.fail(key, "expected a table");
  return n->as_table();
}

// A relative path is taken from the config's folder as the kernel would take it: through
// the real folder behind a symlink (`models/mine -> /data/gpt2`, "../tokenizer" is then
// /data/tokenizer), so the '..' of an existing folder is resolved by the file system, not
// cancelled as text. The file's own name stays as written, a link included (errors then
// name the file the config names, not a blob the link points at).
std::string resolve(const fs::path& dir, const std::string& p) {
  const fs::path joined = fs::path(p).is_absolute() ? fs::path(p) : dir / p;
  const fs::path name = joined.filename();
  const bool plain_name = !name.empty() && name != "." && name != "..";
  std::error_code ec;
  fs::path real = fs::weakly_canonical(plain_name ? joined.parent_path() : joined, ec);
  if (ec) return joined.lexically_normal().string();
  return (plain_name ? real / name : real).string();
}

toml::table parse_document(const std::string& path) {
  // A directory, a FIFO or /dev/zero is refused by name, not read (engine/files.hpp).
  std::string text = files::read_regular(path, path + ": cannot open config file: ", files::kMaxConfigBytes);
  // A UTF-8 byte-order mark, which Windows editors write: toml++ skips it, the scan would not.
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  reject_what_tomlpp_mishandles(text, path);
  try {
    // The scan above follows TOML's grammar, but in a file that is not valid TOML toml++
    // may read on where the scan saw string content (`x = 0"é"`): toml++ checks the
    // structure on an ASCII-only copy first, and reads the real text only when it is valid.
    std::string ascii = text;
    for (char& ch : ascii)
      if (static_cast<unsigned char>(ch) >= 0x80) ch = 'x';
    if (ascii != text) (void)toml::parse(ascii, path);
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw InputError(path + ":" + std::to_string(e.source().begin.line) +
                     ": malformed TOML: " + std::string(e.description()));
  }
}

void read_model(TableReader& m, ModelConfig& cfg) {
  cfg.name = m.required_string("name");
  cfg.vocab_size = m.required_dim("vocab_size");
  cfg.context_length = m.required_dim("context_length");
  cfg.emb_dim = m.required_dim("emb_dim");
  cfg.n_heads = m.required_dim("n_heads");
  cfg.n_layers = m.required_dim("n_layers");
  cfg.ffn_dim = m.dim("ffn_dim").value_or(cfg.emb_dim * 4);
  cfg.qkv_bias = m.boolean("qkv_bias").value_or(true);
  cfg.out_bias = m.boolean("out_bias").value_or(false);
  cfg.tie_embeddings = m.boolean("tie_embeddings").value_or(true);
  if (auto a = m.choice("activation", {"gelu_tanh", "gelu", "relu"}))
    cfg.activation = *a == "gelu_tanh" ? Activation::GeluTanh : *a == "gelu" ? Activation::GeluErf : Activation::Relu;
  if (auto eps = m.number("norm_eps")) {
    // Checked after the conversion to the float the shaders use: 1e45 is a finite double but
    // an infinite float, 1e-50 a positive double but a zero float.
    const float f = static_cast<float>(*eps);
    if (!(std::isfinite(f) && f > 0)) {
      std::ostringstream got;
      got << *eps;
      m.fail("norm_eps", "must be a positive number within float range (1.2e-38 .. 3.4e38), got " + got.str());
    }
    cfg.norm_eps = f;
  }
  if (auto p = m.choice("norm_position", {"pre", "post"}))
    cfg.norm_position = *p == "pre" ? NormPosition::Pre : NormPosition::Post;
  cfg.final_norm = m.boolean("final_norm").value_or(true);
  m.reject_unknown();

  if (cfg.emb_dim % cfg.n_heads != 0)
    m.fail("n_heads", std::to_string(cfg.n_heads) + " does not divide model.emb_dim = " + std::to_string(cfg.emb_dim));
  if (std::string why = head_dim_limit(cfg); !why.empty()) m.fail("n_heads", why);
  if (std::string why = vocab_limit(cfg); !why.empty()) m.fail("vocab_size", why);
}

// [weights.names] for layout = "custom": which roles are required depends on [model].
void read_names(TableReader& n, const ModelConfig& cfg, std::map<std::string, std::string>& names) {
  if (auto lin = n.choice("linear", {"out_in", "in_out"}))
    names["linear"] = *lin;
  else
    names["linear"] = "out_in";
  for (const auto* roles : {&kLayerRoles, &kGlobalRoles})
    for (const auto& role : *roles)
      if (auto v = n.string(role)) {
        bool per_layer = roles == &kLayerRoles;
        bool has_i = v->find("{i}") != std::string::npos;
        if (per_layer && !has_i) n.fail(role, "'" + *v + "' is a per-layer tensor: its name needs {i}");
        if (!per_layer && has_i) n.fail(role, "'" + *v + "' names one tensor for the whole model: no {i} allowed");
        names[role] = *v;
      }
  n.reject_unknown();

  auto has = [&](const char* role) { return names.count(role) > 0; };
  auto require = [&](const char* role, const std::string& why) {
    if (!has(role)) throw InputError(cfg.source + ": missing required key weights.names." + role + why);
  };
  auto forbid = [&](const char* role, const std::string& why) {
    if (has(role)) n.fail(role, "given but " + why);
  };
  for (const char* role : {"tok_emb", "pos_emb", "ln1_weight", "ln1_bias", "ln2_weight", "ln2_bias", "attn_out_weight",
                           "fc_weight", "proj_weight"})
    require(role, "");

  // Attention input projection: one fused tensor or three separate ones, not a mix.
  bool fused = has("qkv_weight");
  bool separate = has("q_weight") || has("k_weight") || has("v_weight");
  if (fused && separate) n.fail("qkv_weight", "given together with q_weight/k_weight/v_weight: use one or the other");
  if (!fused && !separate)
    throw InputError(cfg.source +
                     ": missing required key weights.names.qkv_weight (or q_weight, k_weight and v_weight)");
  if (fused) {
    for (const char* b : {"q_bias", "k_bias", "v_bias"})
      forbid(b, "the projection is fused (qkv_weight): use qkv_bias");
    if (cfg.qkv_bias)
      require("qkv_bias", " (model.qkv_bias = true)");
    else
      forbid("qkv_bias", "model.qkv_bias = false");
  } else {
    for (const char* w : {"q_weight", "k_weight", "v_weight"})
      require(w, " (q_weight, k_weight and v_weight go together)");
    forbid("qkv_bias", "the projection is split (q/k/v_weight): use q_bias, k_bias and v_bias");
    for (const char* b : {"q_bias", "k_bias", "v_bias"}) {
      if (cfg.qkv_bias)
        require(b, " (model.qkv_bias = true)");
      else
        forbid(b, "model.qkv_bias = false");
    }
  }
  if (cfg.final_norm) {
    require("lnf_weight", " (model.final_norm = true)");
    require("lnf_bias", " (model.final_norm = true)");
  } else {
    forbid("lnf_weight", "model.final_norm = false");
    forbid("lnf_bias", "model.final_norm = false");
  }
  if (cfg.tie_embeddings)
    forbid("head_weight", "model.tie_embeddings = true (the head is the token embedding)");
  else
    require("head_weight", " (model.tie_embeddings = false)");
  if (cfg.out_bias)
    require("head_bias", " (model.out_bias = true)");
  else
    forbid("head_bias", "model.out_bias = false");
}

}  // namespace

ModelConfig load_config(const std::string& path) {
  toml::table doc = parse_document(path);
  ModelConfig cfg;
  cfg.source = path;
  const fs::path dir = fs::path(path).parent_path();

  TableReader root(path, "", &doc);
  // Top-level keys print as "model" etc., not ".model".
  auto top = [&](const std::string& key) -> const toml::table* {
    const toml::node* n = root.node(key);
    if (!n) return nullptr;
    if (!n->is_table()) throw InputError(path + ": " + key + ": expected a table [" + key + "]");
    return n->as_table();
  };
  const toml::table* model = top("model");
  const toml::table* weights = top("weights");
  const toml::table* tokenizer = top("tokenizer");
  for (auto&& [k, v] : doc)
    if (k.str() != "model" && k.str() != "weights" && k.str() != "tokenizer")
      throw InputError(path + ":" + std::to_string(v.source().begin.line) + ": unknown key " + excerpt(k.str()));
  if (!model) throw InputError(path + ": missing required table [model]");
  if (!weights) throw InputError(path + ": missing required table [weights]");

  TableReader m(path, "model", model);
  read_model(m, cfg);

  TableReader w(path, "weights", weights);
  cfg.weights_file = resolve(dir, w.required_path("file"));
  cfg.layout = w.choice("layout", {"hf-gpt2", "custom"}).value_or("hf-gpt2");
  if (auto d = w.choice("dtype", {"f32", "f16", "bf16", "q8_0", "q4_0"})) cfg.dtype = parse_dtype(*d);
  if (auto d = w.choice("kv_dtype", {"f32", "f16"})) {
    cfg.kv_dtype = parse_dtype(*d);
    if (cfg.kv_f16() && cfg.head_dim() % 8)
      w.fail("kv_dtype", "an f16 KV cache needs a head dim (emb_dim / n_heads = " + std::to_string(cfg.head_dim()) +
                             ") divisible by 8");
  }
  const toml::table* names = subtable(w, "names");
  w.reject_unknown();
  if (cfg.layout == "custom") {
    if (!names) throw InputError(path + ": missing required table [weights.names] (weights.layout = \"custom\")");
    TableReader n(path, "weights.names", names);
    read_names(n, cfg, cfg.names);
  } else if (names) {
    w.fail("names", "[weights.names] is only for layout = \"custom\" (layout is \"" + cfg.layout + "\")");
  }

  if (tokenizer) {
    TableReader t(path, "tokenizer", tokenizer);
    cfg.tokenizer_vocab = resolve(dir, t.required_path("vocab"));
    cfg.tokenizer_merges = resolve(dir, t.required_path("merges"));
    t.reject_unknown();
  }
  return cfg;
}

std::string head_dim_limit(const ModelConfig& cfg) {
  if (cfg.head_dim() <= kMaxHeadDim) return "";
  return "gives a head dim (embedding / heads) of " + std::to_string(cfg.head_dim()) + ", more than the " +
         std::to_string(kMaxHeadDim) + " the attention kernels take";
}

std::string vocab_limit(const ModelConfig& cfg) {
  if (cfg.vocab_size <= kMaxVocab) return "";
  return "a vocabulary of " + std::to_string(cfg.vocab_size) + " is more than the " + std::to_string(kMaxVocab) +
         " the sampler counts (in floats)";
}

}  // namespace gptvk
