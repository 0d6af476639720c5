// What the model commands share: the device, the config, the weights on the device and
// the GptModel over them, with load timing and clear errors on the way.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "engine/ops/sample.hpp"
#include "engine/vk/context.hpp"
#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace gptvk::cli {

struct ModelFlags {
  std::string config;
  std::string weights;  // overrides the config's [weights] file
};

// Adds --config and --weights to a subcommand. `default_config` is used when --config is
// absent ("" makes --config required).
void add_model_flags(CLI::App* cmd, ModelFlags& flags, const std::string& default_config = "");

// The bundled default model's config, found next to the binary's source tree or install.
std::string default_config_path();

struct ModelSession {
  std::unique_ptr<vk::Context> ctx;
  ModelConfig cfg;
  std::unique_ptr<GptModel> model;
  double load_seconds = 0;
  bool random_weights = false;
};

// Most tokens one forward step takes by default (longer prompts are prefilled chunk by chunk).
constexpr uint32_t kDefaultMaxChunk = 256;

// Opens the device, parses the config and loads the weights. With `allow_random`, a
// missing weights file means deterministic random weights (said on stderr). With `sampling`,
// the sampler for those parameters is compiled while the weights load (ops::SamplerWarmUp).
ModelSession open_model(const Common& common, const ModelFlags& flags, bool allow_random = false,
                        uint32_t max_chunk = kDefaultMaxChunk, const ops::SamplingParams* sampling = nullptr);

// The config's tokenizer; InputError when the config has no [tokenizer] section.
Tokenizer load_tokenizer(const ModelConfig& cfg);

}  // namespace gptvk::cli
