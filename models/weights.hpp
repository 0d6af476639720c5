// A model's weights on the device, in the layout the ops want: every linear weight as a
// [out][in] Matrix in the config's storage dtype (transposed from HF Conv1D [in][out] and
// q/k/v fused into one [3C][C] matrix while loading), biases and LayerNorm parameters as
// f32 buffers. Loading streams from the mapped safetensors file in bounded row blocks, so
// the host never holds a second copy of the model.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "engine/vk/buffer.hpp"
#include "models/config.hpp"
#include "models/safetensors.hpp"
#include "models/weights_source.hpp"

namespace gptvk {

namespace vk {
class Context;
}

struct LayerWeights {
  vk::Buffer ln1_g, ln1_b, ln2_g, ln2_b;  // f32 [C]
  Matrix qkv;                             // [3C][C] out x in: q rows, then k rows, then v rows
  vk::Buffer qkv_b;                       // f32 [3C] (zeros when qkv_bias = false)
  Matrix attn_out;                        // [C][C]
  vk::Buffer attn_out_b;                  // f32 [C] (zeros if absent)
  Matrix fc;                              // [F][C]
  vk::Buffer fc_b;                        // f32 [F] (zeros if absent)
  Matrix proj;                            // [C][F]
  vk::Buffer proj_b;                      // f32 [C] (zeros if absent)
};

struct ModelWeights {
  Matrix tok_emb;  // [V][C] (also the LM head when tied)
  Matrix pos_emb;  // [context][C]
  std::vector<LayerWeights> layers;
  vk::Buffer lnf_g, lnf_b;  // f32 [C] (empty buffers when final_norm = false)
  Matrix head;              // [V][C] when untied (rows == 0 when tied)
  vk::Buffer head_b;        // f32 [V] (empty when out_bias = false)
  const Matrix& lm_head() const { return head.rows ? head : tok_emb; }
  uint64_t device_bytes() const;
  // Every buffer is mapped into host memory (lavapipe, unified-memory GPUs): writing the
  // values is then plain host stores, which may run beside other Vulkan calls.
  bool host_mapped() const;
};

// Device bytes the weights of `cfg` take (matrices with row padding, f32 vectors), known
// before anything is allocated.
uint64_t weights_device_bytes(const ModelConfig& cfg);

// The memory a model's buffers may take on this device: its largest device-local heap, or on
// a CPU device (whose memory is the host's) the host memory available now when that is more,
// at most the address space left under `ulimit -v`.
uint64_t model_memory_bytes(const vk::Context& ctx);
// What model_memory_bytes counts, for messages: on a CPU device " (a CPU device: the host
// memory available now)", naming the address-space limit where one is set; else nothing.
std::string model_memory_note(const vk::Context& ctx);

// All of cfg's weights on the device: vectors zeroed, matrices allocated but not yet
// written (padding columns zeroed). DeviceError when the model cannot fit in the device's
// memory. Filled by WeightsFile::load_into or random_weights; allocating first lets the
// model's pipelines compile while the weights load (GptModel::warm_up).
ModelWeights allocate_weights(vk::Context& ctx, const ModelConfig& cfg);

// Which tensor of a file holds each role (keys of CONTRACT [weights.names]; "{i}" stands
// for the layer) and which way linear weights face.
struct TensorNames {
  bool in_out = false;
  std::map<std::string, std::string> roles;
  bool has(const std::string& role) const;
  std::string name(const std::string& role, uint32_t layer) const;
};

// A weights file (safetensors, GGUF, torch.save, or a snapshot folder: told by its
// content) checked against a config, ready to fill weights allocated for it.
class WeightsFile {
 public:
  // Opens `weights_path` (cfg.weights_file when empty) and checks its header against cfg:
  // every tensor the layout names is present, loadable, and shaped as [model] says, and
  // no layer past [model]'s count is.
  // Reads no tensor data. Throws InputError naming the file and the tensor.
  static WeightsFile open(const ModelConfig& cfg, const std::string& weights_path = "");
  // Writes every tensor into `w` (from allocate_weights for the same config) in cfg.dtype;
  // a progress bar on stderr when it is a terminal and the file is large.
  void load_into(ModelWeights& w) const;

 private:
  WeightsFile() = default;
  // InputError when the file holds a layer past cfg.n_layers under the layout's names.
  void check_layer_count() const;
  ModelConfig cfg_;
  std::unique_ptr<TensorSource> file_;
  TensorNames names_;
  uint64_t total_bytes_ = 0;
};

// allocate_weights + WeightsFile::open(cfg, weights_path).load_into: cfg's weights (or
// `weights_path`'s if non-empty) on the device in cfg.dtype.
ModelWeights load_weights(vk::Context& ctx, const ModelConfig& cfg, const std::string& weights_path = "");

// Deterministic random weights (bench and tests without a file): the same (cfg, seed)
// gives the same values on every device. Scaled like a trained GPT-2 (unit-gain
// LayerNorms, small residual branches) with a wider token embedding so the tied head's
// logits are peaked rather than flat.
ModelWeights random_weights(vk::Context& ctx, const ModelConfig& cfg, uint64_t seed);
// The same values written into weights allocate_weights(ctx, cfg) made.
void fill_random_weights(ModelWeights& w, const ModelConfig& cfg, uint64_t seed);

// Writes the 2-D tensor `t` of `file` into rows [row0, row0 + rows) of `m`, where `t` is
// [rows][m.cols], or [m.cols][rows] when `in_out` (then transposed), converting to m's dtype
// through at most `block_bytes` of host staging at a time. The building block of
// load_weights, public for tools and tests (e.g. matrices split into small chunks).
// Values beyond what m's dtype holds (storage_limit: |w| > 65504 for f16, larger for Q8_0
// and Q4_0, whose block scales are f16) are stored clamped to that limit, not as
// infinities or infinite scales; returns how many were (load_weights says so once).
uint64_t write_tensor_rows(Matrix& m, uint32_t row0, const TensorSource& file, const TensorInfo& t, bool in_out,
                           uint64_t block_bytes = 16ull << 20);
uint64_t write_tensor_rows(Matrix& m, uint32_t row0, const SafetensorsFile& file, const TensorInfo& t, bool in_out,
                           uint64_t block_bytes = 16ull << 20);

}  // namespace gptvk
