#include "models/weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/byte_size.hpp"
#include "engine/error.hpp"
#include "engine/host_memory.hpp"
#include "engine/vk/context.hpp"
#include "models/safetensors.hpp"

namespace gptvk {

namespace {

// Host memory one conversion/transposition step may stage.
constexpr uint64_t kBlockBytes = 16ull << 20;

uint64_t matrix_bytes(DType dtype, uint64_t rows, uint64_t cols) {
  if (is_quantized(dtype)) return rows * quant_row_bytes(dtype, static_cast<uint32_t>(cols));
  return rows * ((cols + kRowAlign - 1) / kRowAlign * kRowAlign) * dtype_bytes(dtype);
}
uint64_t matrix_bytes(const ModelConfig& cfg, uint64_t rows, uint64_t cols) { return matrix_bytes(cfg.dtype, rows, cols); }

// The position table stays f16 when the matrices are quantized: it is small, and read
// one row a token by the embedding, never by a mat-vec.
DType position_dtype(const ModelConfig& cfg) { return is_quantized(cfg.dtype) ? DType::F16 : cfg.dtype; }
uint64_t vector_bytes(uint64_t n) { return std::max<uint64_t>(4, n * 4); }

void check_fits(vk::Context& ctx, const ModelConfig& cfg) {
  const uint64_t need = weights_device_bytes(cfg), have = model_memory_bytes(ctx);
  if (have && need > have)
    throw DeviceError("model needs " + mib_ceil(need) + " of device memory, device has " + mib_ceil(have) +
                      model_memory_note(ctx));
}

}  // namespace

// A CPU device's memory is the host's: lavapipe reports a heap of at most 2 GiB whatever the
// host has, and allocates past it as long as the host can, so there the bound is the
// host's available memory, and under `ulimit -v` the address space left, since every
// buffer is mapped into this process.
uint64_t model_memory_bytes(const vk::Context& ctx) {
  const uint64_t heap = ctx.caps().device_local_bytes;
  if (!ctx.info().is_cpu()) return heap;
  const uint64_t host = std::max(heap, host_available_bytes());
  const auto left = address_space_left();
  return left ? std::min(host, *left) : host;
}

std::string model_memory_note(const vk::Context& ctx) {
  if (!ctx.info().is_cpu()) return "";
  const auto limit = address_space_limit();
  if (!limit) return " (a CPU device: the host memory available now)";
  return " (a CPU device: the host memory available now, within the address-space limit (ulimit -v) of " + mib_ceil(*limit) +
         ")";
}

namespace {

vk::Buffer zero_buffer(vk::Context& ctx, uint64_t n, const std::string& what) {
  vk::Buffer b(ctx, vector_bytes(n), vk::Memory::Device, what);
  b.fill_zero();
  return b;
}

std::string layer_what(uint32_t layer, const char* what) { return "layer " + std::to_string(layer) + " " + what; }

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
  RandomFill(uint64_t seed) : seed_(seed) {}

  // Values uniform with mean `mean` and standard deviation `std`; every tensor draws from
  // its own stream so the values do not depend on the order or block size of filling.
  void matrix(Matrix& m, float std) {
    Rng rng = stream();
    const float a = std * std::sqrt(3.0f);
    const uint32_t block = static_cast<uint32_t>(std::max<uint64_t>(1, kBlockBytes / (uint64_t(m.cols) * 4)));
    std::vector<float> buf;
    for (uint32_t r = 0; r < m.rows; r += block) {
      uint32_t n = std::min(block, m.rows - r);
      buf.resize(uint64_t(n) * m.cols);
      for (float& x : buf) x = a * rng.uniform();
      m.write_rows(r, n, buf.data(), DType::F32);
    }
  }
  void vector(vk::Buffer& b, uint32_t n, float mean, float std) {
    Rng rng = stream();
    std::vector<float> v(n);
    for (float& x : v) x = mean + std * std::sqrt(3.0f) * rng.uniform();
    b.upload(v.data(), v.size() * 4);
  }

 private:
  Rng stream() {
    Rng r{seed_ * 0x2545f4914f6cdd1dull + ++tensor_};
    r.next();
    return r;
  }
  uint64_t seed_;
  uint64_t tensor_ = 0;
};

}  // namespace

uint64_t weights_device_bytes(const ModelConfig& cfg) {
  const uint64_t V = cfg.vocab_size, C = cfg.emb_dim, F = cfg.ffn_dim;
  uint64_t layer = matrix_bytes(cfg, 3 * C, C) + matrix_bytes(cfg, C, C) + matrix_bytes(cfg, F, C) +
                   matrix_bytes(cfg, C, F) + 6 * vector_bytes(C) + vector_bytes(3 * C) + vector_bytes(F);
  uint64_t total = matrix_bytes(cfg.table_dtype(), V, C) + matrix_bytes(position_dtype(cfg), cfg.context_length, C) +
                   cfg.n_layers * layer;
  if (cfg.final_norm) total += 2 * vector_bytes(C);
  if (!cfg.tie_embeddings) total += matrix_bytes(cfg.table_dtype(), V, C);
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

bool ModelWeights::host_mapped() const {
  auto mapped = [](const vk::Buffer& b) { return b.empty() || b.mapped() != nullptr; };
  auto matrix_mapped = [&](const Matrix& m) {
    return std::all_of(m.chunks.begin(), m.chunks.end(), [&](const vk::Buffer& c) { return mapped(c); });
  };
  bool ok = matrix_mapped(tok_emb) && matrix_mapped(pos_emb) && matrix_mapped(head) && mapped(lnf_g) &&
            mapped(lnf_b) && mapped(head_b);
  for (const auto& l : layers)
    ok = ok && matrix_mapped(l.qkv) && matrix_mapped(l.attn_out) && matrix_mapped(l.fc) && matrix_mapped(l.proj) &&
         mapped(l.ln1_g) && mapped(l.ln1_b) && mapped(l.ln2_g) && mapped(l.ln2_b) && mapped(l.qkv_b) &&
         mapped(l.attn_out_b) && mapped(l.fc_b) && mapped(l.proj_b);
  return ok;
}

ModelWeights allocate_weights(vk::Context& ctx, const ModelConfig& cfg) {
  check_fits(ctx, cfg);
  const uint32_t V = cfg.vocab_size, C = cfg.emb_dim, F = cfg.ffn_dim;
  auto matrix = [&](uint32_t rows, uint32_t cols, const std::string& what) {
    return Matrix::create(ctx, cfg.dtype, rows, cols, what);
  };
  auto vector = [&](uint32_t n, const std::string& what) { return zero_buffer(ctx, n, what); };
  ModelWeights w;
  w.tok_emb = Matrix::create(ctx, cfg.table_dtype(), V, C, "token embedding");
  w.pos_emb = Matrix::create(ctx, position_dtype(cfg), cfg.context_length, C, "position embedding");
  for (uint32_t l = 0; l < cfg.n_layers; ++l) {
    LayerWeights lw;
    lw.ln1_g = vector(C, layer_what(l, "ln1 gain"));
    lw.ln1_b = vector(C, layer_what(l, "ln1 bias"));
    lw.qkv = matrix(3 * C, C, layer_what(l, "qkv weight"));
    lw.qkv_b = vector(3 * C, layer_what(l, "qkv bias"));
    lw.attn_out = matrix(C, C, layer_what(l, "attention output weight"));
    lw.attn_out_b = vector(C, layer_what(l, "attention output bias"));
    lw.ln2_g = vector(C, layer_what(l, "ln2 gain"));
    lw.ln2_b = vector(C, layer_what(l, "ln2 bias"));
    lw.fc = matrix(F, C, layer_what(l, "fc weight"));
    lw.fc_b = vector(F, layer_what(l, "fc bias"));
    lw.proj = matrix(C, F, layer_what(l, "proj weight"));
    lw.proj_b = vector(C, layer_what(l, "proj bias"));
    w.layers.push_back(std::move(lw));
  }
  if (cfg.final_norm) {
    w.lnf_g = vector(C, "final norm gain");
    w.lnf_b = vector(C, "final norm bias");
  }
  if (!cfg.tie_embeddings) w.head = Matrix::create(ctx, cfg.table_dtype(), V, C, "LM head");
  if (cfg.out_bias) w.head_b = vector(V, "LM head bias");
  return w;
}

ModelWeights load_weights(vk::Context& ctx, const ModelConfig& cfg, const std::string& weights_path) {
  ModelWeights w = allocate_weights(ctx, cfg);  // a model too big for the device fails before the file is read
  WeightsFile::open(cfg, weights_path).load_into(w);
  return w;
}

ModelWeights random_weights(vk::Context& ctx, const ModelConfig& cfg, uint64_t seed) {
  ModelWeights w = allocate_weights(ctx, cfg);
  fill_random_weights(w, cfg, seed);
  return w;
}

void fill_random_weights(ModelWeights& w, const ModelConfig& cfg, uint64_t seed) {
  const uint32_t C = cfg.emb_dim, F = cfg.ffn_dim;
  const float in_c = 1.0f / std::sqrt(float(C)), in_f = 1.0f / std::sqrt(float(F));
  // Residual branches shrink with depth (GPT-2's 1/sqrt(2 L) init) so the stream stays O(1).
  const float branch = 1.0f / std::sqrt(2.0f * cfg.n_layers);
  RandomFill r(seed);
  // Logit spread ~3 (std of h . e with |h|^2 ~ C): a few tokens stand out, as in a trained model.
  r.matrix(w.tok_emb, 3.0f * in_c);
  r.matrix(w.pos_emb, 0.5f * in_c);
  for (LayerWeights& lw : w.layers) {
    r.vector(lw.ln1_g, C, 1.0f, 0.05f);
    r.vector(lw.ln1_b, C, 0.0f, 0.02f);
    r.matrix(lw.qkv, in_c);
    if (cfg.qkv_bias) r.vector(lw.qkv_b, 3 * C, 0.0f, 0.02f);
    r.matrix(lw.attn_out, in_c * branch);
    r.vector(lw.attn_out_b, C, 0.0f, 0.02f);
    r.vector(lw.ln2_g, C, 1.0f, 0.05f);
    r.vector(lw.ln2_b, C, 0.0f, 0.02f);
    r.matrix(lw.fc, in_c);
    r.vector(lw.fc_b, F, 0.0f, 0.02f);
    r.matrix(lw.proj, in_f * branch);
    r.vector(lw.proj_b, C, 0.0f, 0.02f);
  }
  if (cfg.final_norm) {
    r.vector(w.lnf_g, C, 1.0f, 0.05f);
    r.vector(w.lnf_b, C, 0.0f, 0.02f);
  }
  if (!cfg.tie_embeddings) r.matrix(w.head, 3.0f * in_c);
  if (cfg.out_bias) r.vector(w.head_b, cfg.vocab_size, 0.0f, 0.1f);
}

}  // namespace gptvk
