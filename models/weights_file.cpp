// Reading weights from a safetensors file: which tensor holds each role, the plan that maps
// every role to its place in ModelWeights, and the conversion of each tensor on the way.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>

#include "engine/byte_size.hpp"
#include "engine/error.hpp"
#include "models/gguf_source.hpp"
#include "models/truncation_guard.hpp"
#include "models/weight_values.hpp"
#include "models/weights.hpp"

namespace gptvk {

bool TensorNames::has(const std::string& role) const { return roles.count(role) > 0; }

std::string TensorNames::name(const std::string& role, uint32_t layer) const {
  const std::string& pattern = roles.at(role);
  std::string s;
  size_t from = 0;
  for (size_t p; (p = pattern.find("{i}", from)) != std::string::npos; from = p + 3)
    s += pattern.substr(from, p - from) + std::to_string(layer);
  return s + pattern.substr(from);
}

namespace {

// ---------------------------------------------------------------- names in the file

// What the file holds in place of `wanted`, for a not-found message: a name that ends with it
// (under a prefix no reader strips, such as a Lightning module's "model.") or else the
// alphabetically first name, so that the message shows the layout the file has.
std::string held_instead(const TensorSource& file, std::string_view wanted) {
  const std::vector<std::string> names = file.names();
  if (names.empty()) return " (the file holds no tensors)";
  const auto suffixed =
      std::find_if(names.begin(), names.end(), [&](const std::string& n) { return n.ends_with(wanted); });
  const std::string& shown = suffixed != names.end() ? *suffixed : *std::min_element(names.begin(), names.end());
  return " (the file has '" + excerpt(shown) + "'" + (suffixed != names.end() ? "" : " among others") + ")";
}

// HF GPT-2 (GPT2LMHeadModel saves "transformer.h.0..." plus "lm_head.weight"; GPT2Model
// saves "h.0..."): all linear weights are Conv1D [in][out], q/k/v fused in c_attn.
TensorNames hf_gpt2_names(const ModelConfig& cfg, const TensorSource& file) {
  std::string prefix;
  if (file.contains("token_embd.weight")) {  // a GGUF named by a TOML of the default layout
    check_config_matches_gguf(cfg, file.path());
    TensorNames n;
    n.roles = gguf_tensor_names(file.path(), cfg, [&](const std::string& name) { return file.contains(name); });
    n.roles.erase("linear");
    return n;
  }
  if (file.contains("wte.weight"))
    prefix = "";
  else if (file.contains("transformer.wte.weight"))
    prefix = "transformer.";
  else
    throw InputError(file.path() + ": tensor 'wte.weight' (or 'transformer.wte.weight') not found" +
                     held_instead(file, "wte.weight") + ": not a weights file in the hf-gpt2 layout");
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

// [weights.names] as written, except that a name absent from the file but present under
// the "transformer." prefix (what transformers' *LMHeadModel.save_pretrained writes) is
// taken with the prefix.
TensorNames custom_names(const ModelConfig& cfg, const TensorSource& file) {
  TensorNames n;
  for (const auto& [k, v] : cfg.names) {
    if (k == "linear")
      n.in_out = v == "in_out";
    else
      n.roles[k] = v;
  }
  for (auto& [role, pattern] : n.roles) {
    const std::string first = n.name(role, 0);
    if (!file.contains(first) && file.contains("transformer." + first)) pattern = "transformer." + pattern;
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
                 mib_ceil(total_).c_str());
    std::fflush(stderr);
  }

 private:
  uint64_t total_, done_ = 0;
  bool on_, shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

// ---------------------------------------------------------------- the plan

// Where one tensor of the file goes: rows [row0, ...) of a matrix (transposed from the
// file when in_out), or elements [offset, ...) of an f32 vector.
struct Job {
  std::string role;
  uint32_t layer = 0;
  std::vector<uint64_t> shape;  // what the file must hold
  Matrix* matrix = nullptr;
  uint32_t row0 = 0;
  bool in_out = false;
  vk::Buffer* vector = nullptr;
  uint64_t offset = 0;  // elements
};

// Every tensor the model reads, in loading order, with its place in `w`: the one place
// that maps roles to the model's buffers. Vectors without a tensor (absent biases) keep
// allocate_weights' zeros.
std::vector<Job> plan(const ModelConfig& cfg, const TensorNames& names, ModelWeights& w) {
  const uint32_t V = cfg.vocab_size, C = cfg.emb_dim, F = cfg.ffn_dim;
  const bool io = names.in_out;
  std::vector<Job> jobs;
  auto matrix = [&](const char* role, uint32_t l, Matrix& m, uint32_t row0, uint32_t rows, uint32_t cols,
                    bool in_out) {
    auto shape = in_out ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{rows, cols};
    jobs.push_back({role, l, shape, &m, row0, in_out, nullptr, 0});
  };
  auto vector = [&](const char* role, uint32_t l, vk::Buffer& b, uint32_t n, uint64_t offset = 0) {
    jobs.push_back({role, l, {n}, nullptr, 0, false, &b, offset});
  };
  // Embeddings and the head are [rows][C] lookup tables whatever `linear` says.
  matrix("tok_emb", 0, w.tok_emb, 0, V, C, false);
  matrix("pos_emb", 0, w.pos_emb, 0, cfg.context_length, C, false);
  for (uint32_t l = 0; l < cfg.n_layers; ++l) {
    LayerWeights& L = w.layers[l];
    vector("ln1_weight", l, L.ln1_g, C);
    vector("ln1_bias", l, L.ln1_b, C);
    if (names.has("qkv_weight")) {
      matrix("qkv_weight", l, L.qkv, 0, 3 * C, C, io);
    } else {
      matrix("q_weight", l, L.qkv, 0, C, C, io);
      matrix("k_weight", l, L.qkv, C, C, C, io);
      matrix("v_weight", l, L.qkv, 2 * C, C, C, io);
    }
    if (cfg.qkv_bias && names.has("qkv_bias")) {
      vector("qkv_bias", l, L.qkv_b, 3 * C);
    } else if (cfg.qkv_bias) {
      vector("q_bias", l, L.qkv_b, C, 0);
      vector("k_bias", l, L.qkv_b, C, C);
      vector("v_bias", l, L.qkv_b, C, 2 * C);
    }
    matrix("attn_out_weight", l, L.attn_out, 0, C, C, io);
    if (names.has("attn_out_bias")) vector("attn_out_bias", l, L.attn_out_b, C);
    vector("ln2_weight", l, L.ln2_g, C);
    vector("ln2_bias", l, L.ln2_b, C);
    matrix("fc_weight", l, L.fc, 0, F, C, io);
    if (names.has("fc_bias")) vector("fc_bias", l, L.fc_b, F);
    matrix("proj_weight", l, L.proj, 0, C, F, io);
    if (names.has("proj_bias")) vector("proj_bias", l, L.proj_b, C);
  }
  if (cfg.final_norm) {
    vector("lnf_weight", 0, w.lnf_g, C);
    vector("lnf_bias", 0, w.lnf_b, C);
  }
  if (!cfg.tie_embeddings) matrix("head_weight", 0, w.head, 0, V, C, false);
  if (cfg.out_bias) vector("head_bias", 0, w.head_b, V);
  return jobs;
}

}  // namespace

// ---------------------------------------------------------------- WeightsFile

WeightsFile WeightsFile::open(const ModelConfig& cfg, const std::string& weights_path) {
  WeightsFile f;
  f.cfg_ = cfg;
  f.file_ = open_tensor_source(weights_path.empty() ? cfg.weights_file : weights_path);
  f.names_ = cfg.layout == "custom" ? custom_names(cfg, *f.file_) : hf_gpt2_names(cfg, *f.file_);
  // Every tensor the layout names exists with a loadable dtype...
  for (const auto& [role, pattern] : f.names_.roles) {
    bool per_layer = pattern.find("{i}") != std::string::npos;
    for (uint32_t l = 0; l < (per_layer ? cfg.n_layers : 1u); ++l)
      f.total_bytes_ += f.file_->get(f.names_.name(role, l)).bytes();
  }
  f.check_layer_count();
  // ...and has the shape [model] implies.
  ModelWeights shapes_only;
  shapes_only.layers.resize(cfg.n_layers);
  for (const Job& j : plan(cfg, f.names_, shapes_only)) {
    std::string name = f.names_.name(j.role, j.layer);
    const TensorInfo& t = f.file_->get(name);
    if (t.shape != j.shape)
      throw InputError(f.file_->path() + ": tensor '" + name + "' has shape " + t.shape_str() + ", expected " +
                       shape_str(j.shape) + (cfg.origin == ModelConfig::Origin::Toml
                                                    ? " from the config's [model] (" + cfg.source + ")"
                                                    : " from the hyperparameters in " + cfg.source));
  }
  if (std::string note = f.file_->conversion_note(cfg.dtype, cfg.table_dtype()); !note.empty())
    std::fprintf(stderr, "gpt-vk: %s: dequantizing %s at load\n", f.file_->path().c_str(), note.c_str());
  return f;
}

// A file with a layer past the config's count would run as a shallower model without a
// word (llama.cpp refuses such a GGUF: not every tensor is used). Every tensor a per-layer
// pattern matches, at any index, must be of a layer the model has. Tensors no role names,
// such as HF GPT-2's attn.bias masks or a tied lm_head.weight, are not layers.
void WeightsFile::check_layer_count() const {
  const std::vector<std::string> names = file_->names();
  for (const auto& [role, pattern] : names_.roles) {
    const size_t at = pattern.find("{i}");
    if (at == std::string::npos) continue;
    const std::string_view before(pattern.data(), at), after(pattern.data() + at + 3, pattern.size() - at - 3);
    for (const std::string& name : names) {
      if (name.size() <= before.size() + after.size() || !name.starts_with(before) || !name.ends_with(after)) continue;
      const std::string_view index(name.data() + before.size(), name.size() - before.size() - after.size());
      if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
      if (index.size() < 10 && std::stoul(std::string(index)) < cfg_.n_layers) continue;
      throw InputError(file_->path() + ": holds tensor '" + name + "' of layer " + std::string(index) +
                       ", but the model declares " + std::to_string(cfg_.n_layers) + " layer" +
                       (cfg_.n_layers == 1 ? "" : "s") +
                       (cfg_.source == file_->path() ? "" : " (" + cfg_.source + ")") + ": a wrong layer count");
    }
  }
}

void WeightsFile::load_into(ModelWeights& w) const {
  Progress progress(total_bytes_);
  std::map<DType, uint64_t> clamped;  // values beyond what their matrix's dtype holds
  for (const Job& j : plan(cfg_, names_, w)) {
    const TensorInfo& t = file_->get(names_.name(j.role, j.layer));
    // The file is mapped: if it is truncated underneath, reading it faults (SIGBUS).
    bool read = run_catching_sigbus([&] {
      if (j.matrix) {
        clamped[j.matrix->dtype] += write_tensor_rows(*j.matrix, j.row0, *file_, t, j.in_out);
      } else {
        std::vector<std::byte> raw(t.bytes());  // aligned copy: the mapping may not be
        std::memcpy(raw.data(), file_->data(t).data(), raw.size());
        file_->release(t);
        require_finite(file_->path(), t.name, raw.data(), t.dtype, t.elements(),
                       scan_values(raw.data(), t.dtype, t.elements(), storage_limit(DType::F32)));
        std::vector<float> v(t.elements());
        convert(raw.data(), t.dtype, v.data(), DType::F32, v.size());
        j.vector->upload(v.data(), v.size() * 4, j.offset * 4);
      }
    });
    if (!read)
      throw InputError(file_->path() + ": file changed or truncated while loading (reading tensor '" + t.name + "')");
    progress.add(t.bytes());
  }
  for (const auto& [dtype, count] : clamped)
    if (count)
      std::fprintf(stderr, "gpt-vk: %s: %llu %s beyond %s's range (|w| > %.9g) clamped to +-%.9g in %s "
                   "storage; --dtype f32 or bf16 (or [weights] dtype) keeps them\n", file_->path().c_str(),
                   static_cast<unsigned long long>(count), count == 1 ? "weight" : "weights", dtype_name(dtype),
                   storage_limit(dtype), storage_limit(dtype), dtype_name(dtype));
}

// ---------------------------------------------------------------- one tensor

namespace {

template <class File>
uint64_t write_rows_from(Matrix& m, uint32_t row0, const File& file, const TensorInfo& t, bool in_out,
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
  DType from = t.dtype;
  const float limit = storage_limit(m.dtype);
  const ValueScan scan = scan_values(src, from, t.elements(), limit);
  require_finite(file.path(), t.name, src, from, t.elements(), scan);
  const bool clamp = scan.beyond_limit > 0;
  const std::vector<float> clamped = clamp ? clamped_to(src, from, t.elements(), limit) : std::vector<float>{};
  if (clamp) src = reinterpret_cast<const std::byte*>(clamped.data()), from = DType::F32;
  const uint64_t esize = dtype_bytes(from);
  const uint32_t block = static_cast<uint32_t>(std::clamp<uint64_t>(block_bytes / (uint64_t(cols) * esize), 1, rows));
  std::vector<std::byte> staging;
  for (uint32_t r = 0; r < rows; r += block) {
    const uint32_t n = std::min(block, rows - r);
    if (in_out) {  // row r of m is column r of t
      m.write_rows_transposed(row0 + r, n, src + uint64_t(r) * esize, rows, from);
      continue;
    }
    const void* rows_ptr = src + uint64_t(r) * cols * esize;
    if (reinterpret_cast<uintptr_t>(rows_ptr) % esize) {  // conversion reads whole, aligned elements
      const auto* p = static_cast<const std::byte*>(rows_ptr);
      staging.assign(p, p + uint64_t(n) * cols * esize);
      rows_ptr = staging.data();
    }
    m.write_rows(row0 + r, n, rows_ptr, from);
  }
  file.release(t);
  return scan.beyond_limit;
}

}  // namespace

uint64_t write_tensor_rows(Matrix& m, uint32_t row0, const TensorSource& file, const TensorInfo& t, bool in_out,
                           uint64_t block_bytes) {
  // A GGUF tensor already in the matrix's block format goes up as it is (repacked, no arithmetic).
  const auto blocks = is_quantized(m.dtype) && !in_out ? file.ggml_blocks(t, m.dtype) : std::span<const std::byte>{};
  if (!blocks.empty() && t.shape.size() == 2 && t.shape[1] == m.cols && row0 + t.shape[0] <= m.rows) {
    require_finite_blocks(file.path(), t.name, blocks, m.dtype);
    m.write_rows_ggml(row0, static_cast<uint32_t>(t.shape[0]), blocks.data());
    return 0;
  }
  return write_rows_from(m, row0, file, t, in_out, block_bytes);
}

uint64_t write_tensor_rows(Matrix& m, uint32_t row0, const SafetensorsFile& file, const TensorInfo& t, bool in_out,
                           uint64_t block_bytes) {
  return write_rows_from(m, row0, file, t, in_out, block_bytes);
}

}  // namespace gptvk
