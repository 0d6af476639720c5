// The tokenizer of a Hugging Face snapshot folder, from the files save_pretrained writes:
// vocab.json + merges.txt, or tokenizer.json alone (models/tokenizer_json.hpp), with
// tokenizer.json's added_tokens and tokenizer_config.json's add_bos_token. What gpt-vk's
// tokenizer cannot run as transformers would (another pipeline, add_prefix_space, a GPT-1
// added token, a file that cannot be read) leaves ModelConfig::tokenizer_unsupported saying
// why: the text commands refuse with it, and the model still runs on ids.
#pragma once
#include <string>

#include "models/config.hpp"

namespace gptvk {

// `gpt2`: config.json's model_type is gpt2 (not openai-gpt), whose transformers tokenizers
// read add_prefix_space. Fills cfg's tokenizer fields; a folder with no tokenizer files
// leaves them empty.
void read_snapshot_tokenizer(const std::string& dir, bool gpt2, ModelConfig& cfg);

}  // namespace gptvk
