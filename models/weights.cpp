#include "models/weights.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/error.hpp"
#include "engine/vk/context.hpp"
#include "models/safetensors.hpp"

namespace gptvk {

namespace {

// Host memory one conversion/transposition step may stage.
constexpr uint64_t kBlockBytes = 16ull << 20;

uint64_t matrix_bytes(const ModelConfig& cfg, uint64_t rows, uint64_t cols) {
  return rows * ((cols + kRowAlign - 1) / kRowAlign * kRowAlign) * dtype_bytes(cfg.dtype);
}
uint64_t vector_bytes(uint64_t n) { return std::max<uint64_t>(4, n * 4); }

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

void check_fits(vk::Context& ctx, const ModelConfig& cfg) {
  uint64_t need = weights_device_bytes(cfg), have = ctx.caps().device_local_bytes;
  if (have && need > have) throw DeviceError("model needs " + mib(need) + " of device memory, device has " + mib(have));
}

vk::Buffer f32_buffer(vk::Context& ctx, const std::vector<float>& v, const std::string& what) {
  vk::Buffer b(ctx, vector_bytes(v.size()), vk::Memory::Device, what);
  if (v.empty())
    b.fill_zero();
  else
    b.upload(v.data(), v.size() * 4);
  return b;
}

vk::Buffer zero_buffer(vk::Context& ctx, uint64_t n, const std::string& what) {
  vk::Buffer b(ctx, vector_bytes(n), vk::Memory::Device, what);
  b.fill_zero();
  return b;
}

std::string layer_what(uint32_t layer, const char* what) { return "layer " + std::to_string(layer) + " " + what; }

// ---------------------------------------------------------------- names in the file

// Which tensor holds each role (keys of CONTRACT [weights.names]) and which way linear
// weights face.
struct TensorNames {
  bool in_out = false;
  std::map<std::string, std::string> roles;

  bool has(const std::string& role) const { return roles.count(role) > 0; }
  std::string name(const std::string& role, uint32_t layer) const {
    std::string s = roles.at(role);
    for (size_t p; (p = s.find("{i}")) != std::string::npos;) s.replace(p, 3, std::to_string(layer));
    return s;
  }
};

// HF GPT-2 (GPT2LMHeadModel saves "transformer.h.0..." plus "lm_head.weight"; GPT2Model
// saves "h.0..."): all linear weights are Conv1D [in][out], q/k/v fused in c_attn.
TensorNames hf_gpt2_names(const ModelConfig& cfg, const SafetensorsFile& file) {
  std::string prefix;
  if (file.contains("wte.weight"))
    prefix = "";
  else if (file.contains("transformer.wte.weight"))
    prefix = "transformer.";
  else
    throw InputError(file.path() +
                     ": tensor 'wte.weight' (or 'transformer.wte.weight') not found: "
                     "not a weights file in the hf-gpt2 layout");
  TensorNames n;
  n.in_out = true;
  auto& r = n.roles;
  r["tok_emb"] = prefix + "wte.weight";
  r["pos_emb"] = prefix + "wpe.weight";
  const std::pair<const char*, const char*> per_layer[] = {{"ln1_weight", "ln_1.weight"},
                                                           {"ln1_bias", "ln_1.bias"},
                                                           {"qkv_weight", "attn.c_attn.weight"},
                                                           {"attn_out_weight", "attn.c_proj.weight"},
                                                           {"attn_out_bias", "attn.c_proj.bias"},
                                                           {"ln2_weight", "ln_2.weight"},
                                                           {"ln2_bias", "ln_2.bias"},
                                                           {"fc_weight", "mlp.c_fc.weight"},
                                                           {"fc_bias", "mlp.c_fc.bias"},
                                                           {"proj_weight", "mlp.c_proj.weight"},
                                                           {"proj_bias", "mlp.c_proj.bias"}};
  for (auto [role, suffix] : per_layer) r[role] = prefix + "h.{i}." + suffix;
  if (cfg.qkv_bias) r["qkv_bias"] = prefix + "h.{i}.attn.c_attn.bias";
  if (cfg.final_norm) {
    r["lnf_weight"] = prefix + "ln_f.weight";
    r["lnf_bias"] = prefix + "ln_f.bias";
  }
  if (!cfg.tie_embeddings) r["head_weight"] = "lm_head.weight";
  if (cfg.out_bias) r["head_bias"] = "lm_head.bias";
  return n;
}

TensorNames custom_names(const ModelConfig& cfg) {
  TensorNames n;
  for (const auto& [k, v] : cfg.names) {
    if (k == "linear")
      n.in_out = v == "in_out";
    else
      n.roles[k] = v;
  }
  return n;
}

// ---------------------------------------------------------------- progress

class Progress {
 public:
  Progress(uint64_t total) : total_(total), on_(isatty(STDERR_FILENO) && total >= (256ull << 20)) {}
  ~Progress() {
    if (on_ && shown_) std::fprintf(stderr, "\n");
  }
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    if (shown_ && done_ < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    int pct = static_cast<int>(100.0 * double(done_) / double(total_));
    int bar = pct * 30 / 100;
    std::fprintf(stderr, "\rloading weights [%.*s%*s] %3d%% (%llu / %s)", bar,
                 "==============================", 30 - bar, "", pct, static_cast<unsigned long long>(done_ >> 20),
                 mib(total_).c_str());
    std::fflush(stderr);
  }

 private:
  uint64_t total_, done_ = 0;
  bool on_, shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

// ---------------------------------------------------------------- loading from a file

class Loader {
 public:
  Loader(vk::Context& ctx, const ModelConfig& cfg, const SafetensorsFile& file, TensorNames names)
      : ctx_(ctx), cfg_(cfg), file_(file), names_(std::move(names)), progress_(check_present()) {}

  // The tensor for `role` in `layer`, checked to have `shape`.
  const TensorInfo& tensor(const std::string& role, uint32_t layer, const std::vector<uint64_t>& shape) {
    std::string name = names_.name(role, layer);
    const TensorInfo& t = file_.get(name);
    if (t.shape != shape)
      throw InputError(file_.path() + ": tensor '" + name + "' has shape " + t.shape_str() + ", expected " +
                       shape_str(shape) + " from the config's [model] (" + cfg_.source + ")");
    return t;
  }

  // A [rows][m.cols] block of `m` at row0 from the tensor for `role`, which is stored
  // [rows][cols], or [cols][rows] when `in_out` (Conv1D).
  void write_matrix(Matrix& m, uint32_t row0, const std::string& role, uint32_t layer, uint32_t rows, bool in_out) {
    const TensorInfo& t = in_out ? tensor(role, layer, {m.cols, rows}) : tensor(role, layer, {rows, m.cols});
    write_tensor_rows(m, row0, file_, t, in_out);
    progress_.add(t.bytes());
  }

  Matrix matrix(const std::string& role, uint32_t layer, uint32_t rows, uint32_t cols, bool in_out,
                const std::string& what) {
    Matrix m = Matrix::create(ctx_, cfg_.dtype, rows, cols, what);
    write_matrix(m, 0, role, layer, rows, in_out);
    return m;
  }

  // A 1-D tensor as f32 values.
  std::vector<float> values(const std::string& role, uint32_t layer, uint32_t n) {
    const TensorInfo& t = tensor(role, layer, {n});
    std::vector<std::byte> raw(t.bytes());  // aligned copy: the mapping may not be
    std::memcpy(raw.data(), file_.data(t).data(), raw.size());
    std::vector<float> v(n);
    convert(raw.data(), t.dtype, v.data(), DType::F32, n);
    progress_.add(t.bytes());
    return v;
  }

  vk::Buffer vector(const std::string& role, uint32_t layer, uint32_t n, const std::string& what) {
    return f32_buffer(ctx_, values(role, layer, n), what);
  }
  vk::Buffer vector_or_zeros(const std::string& role, uint32_t layer, uint32_t n, const std::string& what) {
    return names_.has(role) ? vector(role, layer, n, what) : zero_buffer(ctx_, n, what);
  }

  ModelWeights load() {
    const uint32_t V = cfg_.vocab_size, C = cfg_.emb_dim;
    ModelWeights w;
    // Embeddings and the head are [rows][C] lookup tables whatever `linear` says.
    w.tok_emb = matrix("tok_emb", 0, V, C, false, "token embedding");
    w.pos_emb = matrix("pos_emb", 0, cfg_.context_length, C, false, "position embedding");
    for (uint32_t l = 0; l < cfg_.n_layers; ++l) w.layers.push_back(layer(l));
    if (cfg_.final_norm) {
      w.lnf_g = vector("lnf_weight", 0, C, "final norm gain");
      w.lnf_b = vector("lnf_bias", 0, C, "final norm bias");
    }
    if (!cfg_.tie_embeddings) w.head = matrix("head_weight", 0, V, C, false, "LM head");
    if (cfg_.out_bias) w.head_b = vector("head_bias", 0, V, "LM head bias");
    return w;
  }

 private:
  // Every tensor the layout names exists with a loadable dtype, before any device memory
  // is touched; returns the bytes to read (for the progress bar).
  uint64_t check_present() const {
    uint64_t total = 0;
    for (const auto& [role, pattern] : names_.roles) {
      bool per_layer = pattern.find("{i}") != std::string::npos;
      for (uint32_t l = 0; l < (per_layer ? cfg_.n_layers : 1u); ++l) total += file_.get(names_.name(role, l)).bytes();
    }
    return total;
  }

  LayerWeights layer(uint32_t l) {
    const uint32_t C = cfg_.emb_dim, F = cfg_.ffn_dim;
    const bool io = names_.in_out;
    LayerWeights lw;
    lw.ln1_g = vector("ln1_weight", l, C, layer_what(l, "ln1 gain"));
    lw.ln1_b = vector("ln1_bias", l, C, layer_what(l, "ln1 bias"));
    lw.qkv = Matrix::create(ctx_, cfg_.dtype, 3 * C, C, layer_what(l, "qkv weight"));
    if (names_.has("qkv_weight")) {
      write_matrix(lw.qkv, 0, "qkv_weight", l, 3 * C, io);
    } else {
      write_matrix(lw.qkv, 0, "q_weight", l, C, io);
      write_matrix(lw.qkv, C, "k_weight", l, C, io);
      write_matrix(lw.qkv, 2 * C, "v_weight", l, C, io);
    }
    if (!cfg_.qkv_bias) {
      lw.qkv_b = zero_buffer(ctx_, 3 * C, layer_what(l, "qkv bias"));
    } else if (names_.has("qkv_bias")) {
      lw.qkv_b = vector("qkv_bias", l, 3 * C, layer_what(l, "qkv bias"));
    } else {
      std::vector<float> b = values("q_bias", l, C), k = values("k_bias", l, C), v = values("v_bias", l, C);
      b.insert(b.end(), k.begin(), k.end());
      b.insert(b.end(), v.begin(), v.end());
      lw.qkv_b = f32_buffer(ctx_, b, layer_what(l, "qkv bias"));
    }
    lw.attn_out = matrix("attn_out_weight", l, C, C, io, layer_what(l, "attention output weight"));
    lw.attn_out_b = vector_or_zeros("attn_out_bias", l, C, layer_what(l, "attention output bias"));
    lw.ln2_g = vector("ln2_weight", l, C, layer_what(l, "ln2 gain"));
    lw.ln2_b = vector("ln2_bias", l, C, layer_what(l, "ln2 bias"));
    lw.fc = matrix("fc_weight", l, F, C, io, layer_what(l, "fc weight"));
    lw.fc_b = vector_or_zeros("fc_bias", l, F, layer_what(l, "fc bias"));
    lw.proj = matrix("proj_weight", l, C, F, io, layer_what(l, "proj weight"));
    lw.proj_b = vector_or_zeros("proj_bias", l, C, layer_what(l, "proj bias"));
    return lw;
  }

  vk::Context& ctx_;
  const ModelConfig& cfg_;
  const SafetensorsFile& file_;
  TensorNames names_;
  Progress progress_;
};

// ---------------------------------------------------------------- random weights

// splitmix64: a tiny counter-style generator, identical on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform on [-1, 1).
  float uniform() { return static_cast<float>(static_cast<int64_t>(next() >> 40) - (1 << 23)) * (1.0f / (1 << 23)); }
};

class RandomFill {
 public:
  RandomFill(vk::Context& ctx, const ModelConfig& cfg, uint64_t seed) : ctx_(ctx), cfg_(cfg), seed_(seed) {}

  // Values uniform with mean `mean` and standard deviation `std`; every tensor draws from
  // its own stream so the values do not depend on the order or block size of filling.
  Matrix matrix(uint32_t rows, uint32_t cols, float std, const std::string& what) {
    Matrix m = Matrix::create(ctx_, cfg_.dtype, rows, cols, what);
    Rng rng = stream();
    const float a = std * std::sqrt(3.0f);
    const uint32_t block = static_cast<uint32_t>(std::max<uint64_t>(1, kBlockBytes / (uint64_t(cols) * 4)));
    std::vector<float> buf;
    for (uint32_t r = 0; r < rows; r += block) {
      uint32_t n = std::min(block, rows - r);
      buf.resize(uint64_t(n) * cols);
      for (float& x : buf) x = a * rng.uniform();
      m.write_rows(r, n, buf.data(), DType::F32);
    }
    return m;
  }
  vk::Buffer vector(uint32_t n, float mean, float std, const std::string& what) {
    Rng rng = stream();
    std::vector<float> v(n);
    for (float& x : v) x = mean + std * std::sqrt(3.0f) * rng.uniform();
    return f32_buffer(ctx_, v, what);
  }

 private:
  Rng stream() {
    Rng r{seed_ * 0x2545f4914f6cdd1dull + ++tensor_};
    r.next();
    return r;
  }
  vk::Context& ctx_;
  const ModelConfig& cfg_;
  uint64_t seed_;
  uint64_t tensor_ = 0;
};

}  // namespace

void write_tensor_rows(Matrix& m, uint32_t row0, const SafetensorsFile& file, const TensorInfo& t, bool in_out,
                       uint64_t block_bytes) {
  const bool is_2d = t.shape.size() == 2;
  const uint64_t want_rows = !is_2d ? 0 : in_out ? t.shape[1] : t.shape[0];
  const uint64_t want_cols = !is_2d ? 0 : in_out ? t.shape[0] : t.shape[1];
  if (!is_2d || want_cols != m.cols || row0 + want_rows > m.rows)
    throw InputError(file.path() + ": tensor '" + t.name + "' of shape " + t.shape_str() + " does not fit rows [" +
                     std::to_string(row0) + ", ...) of a " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                     " matrix");
  const uint32_t rows = static_cast<uint32_t>(want_rows), cols = m.cols;
  const std::byte* src = file.data(t).data();
  const uint64_t esize = dtype_bytes(t.dtype);
  const uint32_t block = static_cast<uint32_t>(std::clamp<uint64_t>(block_bytes / (uint64_t(cols) * esize), 1, rows));
  std::vector<std::byte> staging;
  for (uint32_t r = 0; r < rows; r += block) {
    const uint32_t n = std::min(block, rows - r);
    if (in_out) {  // row r of m is column r of t
      m.write_rows_transposed(row0 + r, n, src + uint64_t(r) * esize, rows, t.dtype);
      continue;
    }
    const void* rows_ptr = src + uint64_t(r) * cols * esize;
    if (reinterpret_cast<uintptr_t>(rows_ptr) % esize) {  // conversion reads whole, aligned elements
      const auto* p = static_cast<const std::byte*>(rows_ptr);
      staging.assign(p, p + uint64_t(n) * cols * esize);
      rows_ptr = staging.data();
    }
    m.write_rows(row0 + r, n, rows_ptr, t.dtype);
  }
  file.release(t);
}

uint64_t weights_device_bytes(const ModelConfig& cfg) {
  const uint64_t V = cfg.vocab_size, C = cfg.emb_dim, F = cfg.ffn_dim;
  uint64_t layer = matrix_bytes(cfg, 3 * C, C) + matrix_bytes(cfg, C, C) + matrix_bytes(cfg, F, C) +
                   matrix_bytes(cfg, C, F) + 6 * vector_bytes(C) + vector_bytes(3 * C) + vector_bytes(F);
  uint64_t total = matrix_bytes(cfg, V, C) + matrix_bytes(cfg, cfg.context_length, C) + cfg.n_layers * layer;
  if (cfg.final_norm) total += 2 * vector_bytes(C);
  if (!cfg.tie_embeddings) total += matrix_bytes(cfg, V, C);
  if (cfg.out_bias) total += vector_bytes(V);
  return total;
}

uint64_t ModelWeights::device_bytes() const {
  uint64_t b = tok_emb.bytes() + pos_emb.bytes() + head.bytes() + lnf_g.size() + lnf_b.size() + head_b.size();
  for (const auto& l : layers)
    b += l.ln1_g.size() + l.ln1_b.size() + l.ln2_g.size() + l.ln2_b.size() + l.qkv.bytes() + l.qkv_b.size() +
         l.attn_out.bytes() + l.attn_out_b.size() + l.fc.bytes() + l.fc_b.size() + l.proj.bytes() + l.proj_b.size();
  return b;
}

ModelWeights load_weights(vk::Context& ctx, const ModelConfig& cfg, const std::string& weights_path) {
  const std::string path = weights_path.empty() ? cfg.weights_file : weights_path;
  SafetensorsFile file = SafetensorsFile::open(path);
  TensorNames names = cfg.layout == "custom" ? custom_names(cfg) : hf_gpt2_names(cfg, file);
  check_fits(ctx, cfg);
  return Loader(ctx, cfg, file, std::move(names)).load();
}

ModelWeights random_weights(vk::Context& ctx, const ModelConfig& cfg, uint64_t seed) {
  check_fits(ctx, cfg);
  const uint32_t V = cfg.vocab_size, C = cfg.emb_dim, F = cfg.ffn_dim;
  const float in_c = 1.0f / std::sqrt(float(C)), in_f = 1.0f / std::sqrt(float(F));
  // Residual branches shrink with depth (GPT-2's 1/sqrt(2 L) init) so the stream stays O(1).
  const float branch = 1.0f / std::sqrt(2.0f * cfg.n_layers);
  RandomFill r(ctx, cfg, seed);
  ModelWeights w;
  // Logit spread ~3 (std of h . e with |h|^2 ~ C): a few tokens stand out, as in a trained model.
  w.tok_emb = r.matrix(V, C, 3.0f * in_c, "token embedding");
  w.pos_emb = r.matrix(cfg.context_length, C, 0.5f * in_c, "position embedding");
  for (uint32_t l = 0; l < cfg.n_layers; ++l) {
    LayerWeights lw;
    lw.ln1_g = r.vector(C, 1.0f, 0.05f, layer_what(l, "ln1 gain"));
    lw.ln1_b = r.vector(C, 0.0f, 0.02f, layer_what(l, "ln1 bias"));
    lw.qkv = r.matrix(3 * C, C, in_c, layer_what(l, "qkv weight"));
    lw.qkv_b = cfg.qkv_bias ? r.vector(3 * C, 0.0f, 0.02f, layer_what(l, "qkv bias"))
                            : zero_buffer(ctx, 3 * C, layer_what(l, "qkv bias"));
    lw.attn_out = r.matrix(C, C, in_c * branch, layer_what(l, "attention output weight"));
    lw.attn_out_b = r.vector(C, 0.0f, 0.02f, layer_what(l, "attention output bias"));
    lw.ln2_g = r.vector(C, 1.0f, 0.05f, layer_what(l, "ln2 gain"));
    lw.ln2_b = r.vector(C, 0.0f, 0.02f, layer_what(l, "ln2 bias"));
    lw.fc = r.matrix(F, C, in_c, layer_what(l, "fc weight"));
    lw.fc_b = r.vector(F, 0.0f, 0.02f, layer_what(l, "fc bias"));
    lw.proj = r.matrix(C, F, in_f * branch, layer_what(l, "proj weight"));
    lw.proj_b = r.vector(C, 0.0f, 0.02f, layer_what(l, "proj bias"));
    w.layers.push_back(std::move(lw));
  }
  if (cfg.final_norm) {
    w.lnf_g = r.vector(C, 1.0f, 0.05f, "final norm gain");
    w.lnf_b = r.vector(C, 0.0f, 0.02f, "final norm bias");
  }
  if (!cfg.tie_embeddings) w.head = r.matrix(V, C, 3.0f * in_c, "LM head");
  if (cfg.out_bias) w.head_b = r.vector(V, 0.0f, 0.1f, "LM head bias");
  return w;
}

}  // namespace gptvk
