// A model described by a TOML file in the schema of the CONTRACT ([model], [weights],
// [weights.names], [tokenizer]). Every path is resolved against the TOML file's directory.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/ops/activation.hpp"
#include "models/tokenizer/added_tokens.hpp"

namespace gptvk {

enum class NormPosition { Pre, Post };

struct ModelConfig {
  // Where the model's description came from, for error messages: the TOML file, a GGUF
  // file's metadata, or a Hugging Face snapshot's config.json.
  enum class Origin { Toml, Gguf, Snapshot };
  std::string source;  // that file's path
  Origin origin = Origin::Toml;

  // [model]
  std::string name;
  uint32_t vocab_size = 0;
  uint32_t context_length = 0;
  uint32_t emb_dim = 0;
  uint32_t n_heads = 0;
  uint32_t n_layers = 0;
  uint32_t ffn_dim = 0;  // default 4 * emb_dim
  bool qkv_bias = true;
  bool out_bias = false;
  bool tie_embeddings = true;
  Activation activation = Activation::GeluTanh;
  float norm_eps = 1e-5f;
  NormPosition norm_position = NormPosition::Pre;
  bool final_norm = true;
  uint32_t head_dim() const { return emb_dim / n_heads; }

  // [weights]
  std::string weights_file;  // absolute or resolved path; may not exist (bench fills random weights)
  std::string layout = "hf-gpt2";  // "hf-gpt2" | "custom"
  DType dtype = DType::F32;        // storage on the device
  // The token embedding's and LM head's storage when it differs from dtype: a quantized
  // GGUF file whose token_embd is in the other block type (llama-quantize's Q4_0 keeps it
  // Q8_0 where rows are too short for K-quants) loads it in that type, not requantized.
  std::optional<DType> embedding_dtype;
  DType table_dtype() const { return embedding_dtype.value_or(dtype); }
  // kv_dtype: storage of the KV cache on the device, f32 (the default: attention exactly as
  // in f32) or f16 (half the memory and half the bytes a decode step reads from the cache;
  // needs head_dim % 8 == 0).
  DType kv_dtype = DType::F32;
  bool kv_f16() const { return kv_dtype == DType::F16; }
  // [weights.names] for layout = "custom": key -> pattern with {i} for the layer index;
  // plus "linear" -> "out_in" | "in_out".
  std::map<std::string, std::string> names;

  // [tokenizer]; empty when the config has none
  std::string tokenizer_vocab;
  std::string tokenizer_merges;
  // A tokenizer carried by the model file itself (GGUF metadata), or a snapshot's vocab.json
  // with tokenizer.json's added tokens in it, as the text of a vocab.json and a merges.txt;
  // null otherwise.
  // Shared, as every model a config makes keeps a copy of the config (a GPT-2 vocabulary's
  // text is a megabyte, and a server holds a model per slot).
  std::shared_ptr<const std::string> tokenizer_vocab_json, tokenizer_merges_text;
  // Why this model's text cannot be tokenized (a GGUF file's tokenizer of another kind than
  // gpt2's); empty when it can or when there is simply no tokenizer.
  std::string tokenizer_unsupported;
  // The vocabulary's added tokens (a GGUF file's CONTROL and USER_DEFINED tokens, a
  // snapshot's tokenizer.json added_tokens), matched whole in the text before the BPE.
  std::vector<AddedToken> tokenizer_added;
  // The model file's own document ids (GGUF tokenizer.ggml.bos_token_id, eos_token_id,
  // eot_token_id, eom_token_id; config.json's bos_token_id and eos_token_id, one or a list),
  // each below vocab_size: generation stops at any end id as at "<|endoftext|>", and an
  // empty prompt starts from the start id. None in a TOML's model.
  std::optional<uint32_t> start_token_id;
  std::vector<uint32_t> end_token_ids;
  // The model file asks for its start token before every text (GGUF
  // tokenizer.ggml.add_bos_token, a snapshot's tokenizer_config.json add_bos_token), as
  // llama.cpp and transformers then add it: prompts, scored texts and tokenize's ids begin
  // with it.
  bool start_every_text = false;
};

// The largest dimensions the kernels take, whatever file describes the model. The attention
// kernels hold a head's query and sums per invocation, unrolled over the head dim: past
// 512 they take minutes to compile (GPT-2 and GPT-1 use 64). The sampler counts tokens in
// floats.
constexpr uint32_t kMaxHeadDim = 512;
constexpr uint32_t kMaxVocab = (1u << 24) - 1;
// Why the kernels cannot run a model of cfg's dimensions ("" when they can), for each file
// format to report under its own key.
std::string head_dim_limit(const ModelConfig& cfg);
std::string vocab_limit(const ModelConfig& cfg);

// Parses and checks a config. Throws InputError naming the file and the key on: malformed
// TOML, unknown or missing keys, wrong types, bad values, inconsistent dimensions.
ModelConfig load_config(const std::string& path);

}  // namespace gptvk
