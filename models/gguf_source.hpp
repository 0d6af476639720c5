// A GGUF file of llama.cpp's `gpt2` architecture as a model: its tensors as a
// TensorSource (quantized ones dequantized one at a time), its hyperparameters and
// tokenizer as a ModelConfig, so `--model x.gguf` needs nothing else.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/dtype.hpp"
#include "models/config.hpp"
#include "models/weights_source.hpp"

namespace gptvk {

class GgufFile;

std::unique_ptr<TensorSource> open_gguf_source(const std::string& path);

// The config of a `gpt2` GGUF file: [model] from the gpt2.* keys and the tensors' shapes,
// the custom layout of llama.cpp's tensor names, the tokenizer from tokenizer.ggml.*; the
// device storage `dtype`. InputError naming the file and key for another architecture or
// a missing or bad key.
ModelConfig gguf_model_config(const GgufFile& file, DType dtype);

// The device storage that runs a GGUF file's matrices in their own format: Q8_0 or Q4_0
// when its first block's qkv weight is of that type, else f16.
DType gguf_native_dtype(const GgufFile& file);

// A TOML config that names a GGUF file (hf-gpt2 layout) must describe the model the file's
// metadata and tensors describe: InputError naming the first [model] key that differs
// (n_heads, norm_eps and tie_embeddings are not in the tensors' shapes), or a tensor the
// config would leave unread.
void check_config_matches_gguf(const ModelConfig& cfg, const std::string& path);

// [weights.names] (custom layout, "linear" = "out_in") of llama.cpp's gpt2 tensor names for
// `cfg`, with the optional biases that `has` says the file (`path`) holds: in every layer
// or in none (InputError otherwise, rather than a layer's bias left unused).
std::map<std::string, std::string> gguf_tensor_names(const std::string& path, const ModelConfig& cfg,
                                                     const std::function<bool(const std::string&)>& has);

}  // namespace gptvk
