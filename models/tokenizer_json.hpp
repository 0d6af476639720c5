// tokenizer.json, the one file Hugging Face's `tokenizers` writes for a whole tokenizer (and
// all that a snapshot saved through PreTrainedTokenizerFast may hold), read as the
// vocab.json + merges.txt inside its BPE model, when its pipeline is one gpt-vk's tokenizer
// runs: GPT-2's byte-level BPE or GPT-1's BERT-split BPE with "</w>" word ends
// (models/tokenizer/tokenizer.hpp). Any other normalizer, pre-tokenizer, post-processor,
// decoder or BPE option would make other ids or text than transformers', so it is named
// and refused rather than run.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace gptvk {

struct TokenizerJsonBpe {
  std::string vocab_json;   // model.vocab as a vocab.json's text
  std::string merges_text;  // model.merges as a merges.txt's text, one "LEFT RIGHT" a line
  // Why gpt-vk cannot run this pipeline ("PATH: pre_tokenizer: Metaspace is not ..."); empty
  // when it can (vocab_json and merges_text are then filled).
  std::string unsupported;
};

// InputError "PATH: model...: cause" where the BPE model itself is malformed: merges that
// are neither "A B" strings nor [A, B] pairs, a vocab that is not an object.
TokenizerJsonBpe tokenizer_json_bpe(const std::string& path, const nlohmann::json& t);

// The pipeline check alone ("" when gpt-vk runs it): for a folder whose vocab.json and
// merges.txt gpt-vk reads, while transformers' fast tokenizer runs its tokenizer.json.
std::string tokenizer_json_mismatch(const std::string& path, const nlohmann::json& t);

}  // namespace gptvk
