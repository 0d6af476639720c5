// Hugging Face snapshot folders made from the test fixtures, for tests of `--model FOLDER`.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace gptvk::test {

// config.json of tests/fixtures/models/hf_gpt2 (V 311, ctx 73, C 64, 2 heads, 2 layers) as
// transformers writes it for a GPT2Config.
inline nlohmann::json hf_gpt2_json() {
  return {{"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 2}, {"n_positions", 73},
          {"vocab_size", 311},   {"n_inner", nullptr}, {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5}, {"tie_word_embeddings", true}, {"bos_token_id", 50256},
          {"eos_token_id", 50256}};
}

// A snapshot folder: `config` as config.json and the weights (copied), nothing else.
inline std::string snapshot(const TempDir& dir, const nlohmann::json& config, const std::filesystem::path& weights) {
  dir.write("config.json", config.dump());
  std::filesystem::copy_file(weights, dir / "model.safetensors", std::filesystem::copy_options::overwrite_existing);
  return dir.path.string();
}

}  // namespace gptvk::test
