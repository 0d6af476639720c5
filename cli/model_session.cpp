#include "cli/model_session.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/model_rules.hpp"
#include "engine/error.hpp"
#include "engine/files.hpp"
#include "engine/interpose/yielding_waits.hpp"
#include "engine/ops/sample_shape.hpp"
#include "models/model_path.hpp"
#include "models/weights.hpp"

namespace gptvk::cli {

namespace fs = std::filesystem;

namespace {

// A path flag given as "" (an unset shell variable, -m "$MODEL") is refused: ignored, it
// would run the bundled model, or the config's weights, in place of the one meant.
CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& s) -> std::string { return s.empty() ? "empty path" : ""; }, "PATH");
}

CLI::Option* add_source_flags(CLI::App* cmd, ModelFlags& flags) {
  auto* config = cmd->add_option("--config", flags.config, "model config (TOML); default: the bundled model")
                     ->check(non_empty_path());
  auto* model = cmd->add_option("-m,--model", flags.model,
                                "instead of --config: a GGUF file (llama.cpp's gpt2), a Hugging Face snapshot folder "
                                "(config.json of gpt2 or openai-gpt, safetensors or pytorch_model.bin weights, vocab.json + "
                                "merges.txt or tokenizer.json), or a folder holding a gpt-vk config.toml")
                    ->check(non_empty_path());
  model->excludes(config);
  cmd->add_option("--dtype", flags.dtype,
                  "device storage of the weights with --model: f32, f16, bf16, q8_0 or q4_0 (8 or 4-bit blocks); "
                  "default: a GGUF file's own Q8_0 or Q4_0, a folder's config.toml's dtype, else f16")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}))
      ->needs(model);
  return model;
}

}  // namespace

void add_model_flags(CLI::App* cmd, ModelFlags& flags) {
  auto* model = add_source_flags(cmd, flags);
  cmd->add_option("--weights", flags.weights,
                  "weights file (safetensors, GGUF or torch.save, told by content), or a folder of a snapshot's "
                  "model.safetensors / pytorch_model.bin (or their shards); overrides the config's [weights] file")
      ->check(non_empty_path())
      ->excludes(model);
}

void add_model_source_flags(CLI::App* cmd, ModelFlags& flags) {
  add_source_flags(cmd, flags);
}

ModelConfig resolve_model_config(const ModelFlags& flags) {
  if (!flags.model.empty()) {
    ModelConfig cfg = model_config_for_path(flags.model, flags.dtype.empty() ? default_dtype_for_path(flags.model)
                                                                             : parse_dtype(flags.dtype));
    // A folder's config.toml (or a .toml given as --model) says its own dtype; an explicit
    // --dtype wins there too, as it does for GGUF files and snapshots.
    if (!flags.dtype.empty()) cfg.dtype = parse_dtype(flags.dtype);
    return cfg;
  }
  return load_config(flags.config.empty() ? default_config_path() : flags.config);
}

std::string default_config_path() {
  // Installed layout first, then the source tree the binary was built from.
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "../share/gpt-vk/models/default/config.toml");
    candidates.push_back(exe.parent_path() / "../models/default/config.toml");
  }
#ifdef GPTVK_SOURCE_DIR
  candidates.push_back(fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml");
#endif
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return fs::weakly_canonical(c, ec).string();
  throw UsageError("no --config given and the bundled default model (models/default/config.toml) was not found");
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

ModelSession open_model(const Common& common, const ModelFlags& flags, const OpenOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  ModelSession s;
  s.cfg = resolve_model_config(flags);
  std::string weights = flags.weights.empty() ? s.cfg.weights_file : flags.weights;
  // files::exists: a symlink loop or an unreadable directory is bad input naming the path, not exit 3.
  auto exists = [](const std::string& p) { return files::exists(p, "cannot open weights file " + p + ": "); };
  // bench (allow_random) fills random weights when neither --weights nor the config's file
  // exists (the contract); a missing --weights beside an existing config file is a mistake.
  if (!flags.weights.empty() && !exists(flags.weights) &&
      (!options.allow_random || (!s.cfg.weights_file.empty() && exists(s.cfg.weights_file))))
    throw InputError("weights file " + flags.weights + " not found");
  vk::ContextOptions o;
  o.device_index = common.device;
  o.validation = common.validation;
  s.ctx = std::make_unique<vk::Context>(o);
#if GPTVK_YIELDING_WAITS
  // lavapipe's threads wait for each dispatch on condition variables: yielding first saves
  // the vCPU wake-ups (engine/interpose/yielding_waits.cpp).
  yielding_waits::enable(s.ctx->info().is_cpu());
#endif
  if (options.sampling)
    s.sampler_warm_up = std::make_unique<ops::SamplerWarmUp>(*s.ctx, s.cfg.vocab_size, *options.sampling);
  else if (options.samples)
    (void)ops::sampler_shape(*s.ctx, s.cfg.vocab_size);  // throws where the vocabulary is too large
  s.random_weights = options.allow_random && !exists(weights);
  if (!s.random_weights) {
    if (!exists(weights)) throw InputError("weights file " + weights + " not found (set [weights] file or --weights)");
    s.deferred_ = std::make_unique<WeightsFile>(WeightsFile::open(s.cfg, weights));
  }
  // The model (its KV cache and graphs) is built before any weight is written, so that what
  // does not fit the device fails before the seconds that writing gigabytes takes.
  s.model = std::make_unique<GptModel>(*s.ctx, s.cfg, allocate_weights(*s.ctx, s.cfg), options.max_chunk);
  if (s.random_weights) {
    std::fprintf(stderr, "gpt-vk: weights file %s not found: using deterministic random weights\n", weights.c_str());
    fill_random_weights(s.model->weights(), s.cfg, 1234);
  }
  s.load_seconds = seconds_since(t0);
  if (!options.defer_weights) s.load_weights();
  return s;
}

void ModelSession::start_loading_weights() {
  if (!deferred_ || loading_.valid() || !model->weights().host_mapped()) return;
  loading_ = std::async(std::launch::async, [file = deferred_.get(), &w = model->weights()] {
    auto t0 = std::chrono::steady_clock::now();
    file->load_into(w);
    return seconds_since(t0);
  });
}

void ModelSession::load_weights() {
  if (loading_.valid()) {
    load_seconds += loading_.get();
  } else if (deferred_) {
    auto t0 = std::chrono::steady_clock::now();
    deferred_->load_into(model->weights());
    load_seconds += seconds_since(t0);
  }
  deferred_.reset();  // unmaps the file
}

namespace {

Tokenizer read_tokenizer_files(const ModelConfig& cfg) {
  if (!cfg.tokenizer_unsupported.empty()) throw InputError(cfg.tokenizer_unsupported);
  if (cfg.tokenizer_vocab_json)
    return Tokenizer::from_text(cfg.tokenizer_vocab, *cfg.tokenizer_vocab_json, cfg.tokenizer_merges,
                                *cfg.tokenizer_merges_text, cfg.tokenizer_added);
  if (cfg.tokenizer_vocab.empty() || cfg.tokenizer_merges.empty()) {
    using Origin = ModelConfig::Origin;
    const std::string what = cfg.origin == Origin::Snapshot ? "no vocab.json + merges.txt or tokenizer.json beside it"
                             : cfg.origin == Origin::Gguf   ? "no tokenizer in its metadata"
                                                            : "no [tokenizer] section with vocab and merges";
    throw InputError(cfg.source + ": " + what + " (needed to handle text)");
  }
  return Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
}

}  // namespace

Tokenizer load_tokenizer(const ModelConfig& cfg) {
  Tokenizer tok = read_tokenizer_files(cfg);
  tok.set_document_ids(cfg.start_token_id, cfg.end_token_ids, cfg.start_every_text);
  // Without a start token to add (GPT-1's vocabulary has no <|endoftext|>), every text would
  // run on other ids than the file's own tokenizer gives.
  if (cfg.start_every_text && !tok.start_id())
    throw InputError(cfg.source + ": the tokenizer asks for a bos token before every text (add_bos_token), but "
                                  "the vocabulary has none");
  return tok;
}

Tokenizer load_model_tokenizer(const ModelConfig& cfg) {
  Tokenizer tok = load_tokenizer(cfg);
  require_tokenizer_fits(tok, cfg);
  return tok;
}

}  // namespace gptvk::cli
