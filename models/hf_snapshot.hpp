// A Hugging Face snapshot folder (what save_pretrained writes or the hub serves):
// config.json of model_type "gpt2" or "openai-gpt", the weights as model.safetensors, as
// shards listed in model.safetensors.index.json, or as a torch.save pytorch_model.bin,
// and for GPT-2 vocab.json + merges.txt.
#pragma once
#include <memory>
#include <string>

#include "engine/dtype.hpp"
#include "models/config.hpp"
#include "models/weights_source.hpp"

namespace gptvk {

// The folder's config: [model] from config.json, weights_file = the folder, the layout of
// its model_type (keys with or without the "transformer." prefix), the tokenizer files.
// InputError naming the folder and the key for anything it cannot run.
ModelConfig snapshot_model_config(const std::string& dir, DType dtype);

// The folder's weights, single-file or sharded.
std::unique_ptr<TensorSource> open_snapshot_weights(const std::string& dir);

}  // namespace gptvk
