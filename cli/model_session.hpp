// What the model commands share: the device, the config, the weights on the device and
// the GptModel over them, with load timing and clear errors on the way.
#pragma once
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "engine/ops/sample.hpp"
#include "engine/vk/context.hpp"
#include "models/config.hpp"
#include "models/gpt_model.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"

namespace gptvk::cli {

struct ModelFlags {
  std::string config;
  std::string weights;  // overrides the config's [weights] file
  std::string model;    // --model: a GGUF file or a Hugging Face snapshot folder
  std::string dtype;    // --dtype: device storage with --model ("" = f16)
};

// Adds --config, --model (-m), --dtype and --weights to a subcommand; with neither --config
// nor --model it runs the bundled model.
void add_model_flags(CLI::App* cmd, ModelFlags& flags);
// The same without --weights: commands that read only the tokenizer (the bundled model's
// when neither flag is given).
void add_model_source_flags(CLI::App* cmd, ModelFlags& flags);

// The config the flags name: the TOML of --config (or the bundled model's), or the one
// --model's file or folder implies. UsageError when neither is given and there is no
// default.
ModelConfig resolve_model_config(const ModelFlags& flags);

// The bundled default model's config, found next to the binary's source tree or install.
std::string default_config_path();

// Most tokens one forward step takes by default (longer prompts are prefilled chunk by chunk).
constexpr uint32_t kDefaultMaxChunk = 256;

struct OpenOptions {
  // A missing weights file means deterministic random weights (said on stderr).
  bool allow_random = false;
  uint32_t max_chunk = kDefaultMaxChunk;
  // Compile the sampler for these parameters while the weights load (ops::SamplerWarmUp).
  const ops::SamplingParams* sampling = nullptr;
  // The command samples tokens (with `sampling` too): a vocabulary too large for this
  // device's sampler is refused before any weight is read.
  bool samples = false;
  // Check the weights file but leave its values for ModelSession::load_weights(), so the
  // caller can first set the model's pipelines compiling (GptModel::warm_up).
  bool defer_weights = false;
};

struct ModelSession {
  std::unique_ptr<vk::Context> ctx;
  std::unique_ptr<ops::SamplerWarmUp> sampler_warm_up;  // declared after ctx: waited for before it goes
  ModelConfig cfg;
  std::unique_ptr<GptModel> model;
  double load_seconds = 0;
  bool random_weights = false;

  // Starts writing the weights OpenOptions::defer_weights left on a thread of their own,
  // when every weight buffer is host-mapped (plain stores, which may run beside the caller's
  // Vulkan calls: building and warming up graphs); otherwise does nothing.
  void start_loading_weights();
  // Writes the deferred weights, or waits for start_loading_weights() to finish (rethrowing
  // its error); nothing when there are none. Adds the loading time to load_seconds.
  void load_weights();

 private:
  friend ModelSession open_model(const Common&, const ModelFlags&, const OpenOptions&);
  std::unique_ptr<WeightsFile> deferred_;  // heap: the loading thread keeps its address
  std::future<double> loading_;            // seconds; declared last: joined before the rest goes
};

// Opens the device, parses the config, checks the weights file and (unless deferred)
// loads the weights.
ModelSession open_model(const Common& common, const ModelFlags& flags, const OpenOptions& options = {});

// The config's tokenizer, with the model file's own bos / eos ids; InputError when the
// config has no [tokenizer] section.
Tokenizer load_tokenizer(const ModelConfig& cfg);
// The same for a command that runs the model on text: InputError also when the tokenizer's
// vocabulary is not the model's (model_rules.hpp).
Tokenizer load_model_tokenizer(const ModelConfig& cfg);

}  // namespace gptvk::cli
