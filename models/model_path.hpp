// `--model PATH`: the config of whatever PATH is, told by its content: a GGUF file, a
// Hugging Face snapshot folder (config.json), or a folder with a gpt-vk config.toml.
#pragma once
#include <string>

#include "engine/dtype.hpp"
#include "models/config.hpp"

namespace gptvk {

// `dtype` is the device storage (what --dtype says; the TOML's own when PATH holds one).
// InputError naming PATH and what it looks like when it is none of these.
ModelConfig model_config_for_path(const std::string& path, DType dtype);
// The storage `path` runs in without --dtype: a GGUF file's own Q8_0 or Q4_0 (gguf_native_dtype), else f16.
DType default_dtype_for_path(const std::string& path);

}  // namespace gptvk
