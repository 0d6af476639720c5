#include "models/tokenizer_json.hpp"

#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/error.hpp"
#include "models/tokenizer/vocab_files.hpp"

namespace gptvk {

namespace {

using nlohmann::json;

const json& field(const json& part, const char* key) {
  static const json kAbsent;
  return part.is_object() && part.contains(key) ? part.at(key) : kAbsent;
}

// A part's "type", or the part as written where it has none ("null" for an absent one).
std::string type_of(const json& part) {
  const json& type = field(part, "type");
  return type.is_string() ? type.get<std::string>() : excerpt(part.dump());
}

bool null_or_empty(const json& v) { return v.is_null() || v == json(""); }

// The first part of `t` unlike GPT-2's byte-level pipeline, as "part: why", or "".
std::string byte_level_mismatch(const json& t) {
  const json& norm = field(t, "normalizer");
  if (!norm.is_null()) return "normalizer: " + type_of(norm) + " is not supported (GPT-2's byte-level BPE has none)";
  const json& pre = field(t, "pre_tokenizer");
  // tokenizers' own default is true: only a written false leaves the text's start alone.
  if (field(pre, "add_prefix_space") != json(false))
    return "pre_tokenizer: ByteLevel without \"add_prefix_space\": false is not supported (it puts a space before "
           "the text, which GPT-2's tokenizer does not)";
  if (const json& regex = field(pre, "use_regex"); !(regex.is_null() || regex == json(true)))
    return "pre_tokenizer: ByteLevel with \"use_regex\": " + excerpt(regex.dump()) +
           " is not supported (GPT-2's tokenizer splits words by its pattern first)";
  const json& post = field(t, "post_processor");
  if (!post.is_null() && type_of(post) != "ByteLevel")
    return "post_processor: " + type_of(post) + " is not supported (it adds tokens GPT-2's tokenizer does not)";
  if (type_of(field(t, "decoder")) != "ByteLevel")
    return "decoder: " + type_of(field(t, "decoder")) + " is not supported (ByteLevel, which gives the bytes back)";
  return "";
}

// The same for GPT-1's: transformers' OpenAIGPTConverter writes each of these.
std::string bert_mismatch(const json& t) {
  const json& norm = field(t, "normalizer");
  if (type_of(norm) != "BertNormalizer")
    return "normalizer: " + type_of(norm) + " is not supported (GPT-1's is BertNormalizer)";
  for (const char* key : {"lowercase", "clean_text", "handle_chinese_chars"})
    if (field(norm, key) != json(true))
      return std::string("normalizer: BertNormalizer with ") + key + " " + excerpt(field(norm, key).dump()) +
             " is not supported (GPT-1's has true)";
  // null: as lowercase says, which is true here.
  if (const json& accents = field(norm, "strip_accents"); !(accents.is_null() || accents == json(true)))
    return "normalizer: BertNormalizer with strip_accents " + excerpt(accents.dump()) +
           " is not supported (GPT-1's strips them: null or true)";
  if (const json& post = field(t, "post_processor"); !post.is_null())
    return "post_processor: " + type_of(post) + " is not supported (it adds tokens GPT-1's tokenizer does not)";
  const json& dec = field(t, "decoder");
  if (type_of(dec) != "BPEDecoder" || field(dec, "suffix") != json("</w>"))
    return "decoder: " + excerpt(dec.dump()) + " is not supported (BPEDecoder with suffix \"</w>\")";
  return "";
}

// The BPE options that would change its tokens from GPT-2's merging (or GPT-1's, whose
// words end in "</w>" and whose unknown characters become "<unk>").
std::string bpe_mismatch(const json& m, bool gpt1) {
  if (type_of(m) != "BPE") return "model: " + type_of(m) + " is not supported (BPE)";
  if (!(field(m, "dropout").is_null() || field(m, "dropout") == json(0)))
    return "model: dropout " + field(m, "dropout").dump() + " is not supported (it merges at random)";
  if (!null_or_empty(field(m, "continuing_subword_prefix")))
    return "model: continuing_subword_prefix " + excerpt(field(m, "continuing_subword_prefix").dump()) +
           " is not supported";
  const json& suffix = field(m, "end_of_word_suffix");
  if (gpt1 ? suffix != json("</w>") : !null_or_empty(suffix))
    return "model: end_of_word_suffix " + excerpt(suffix.dump()) + " is not supported (" +
           (gpt1 ? "\"</w>\" with BertPreTokenizer)" : "none with ByteLevel)");
  if (gpt1 && field(m, "unk_token") != json("<unk>"))
    return "model: unk_token " + excerpt(field(m, "unk_token").dump()) + " is not supported (\"<unk>\")";
  // GPT-1's unknown characters are one "<unk>" each; fused, a run of them would be one.
  if (gpt1 && field(m, "fuse_unk") == json(true)) return "model: fuse_unk true is not supported";
  if (field(m, "byte_fallback") == json(true)) return "model: byte_fallback true is not supported";
  if (field(m, "ignore_merges") == json(true))
    return "model: ignore_merges true is not supported (a word in the vocabulary would skip the merges)";
  return "";
}

std::string merges_text(const std::string& path, const json& merges) {
  if (!merges.is_array()) throw InputError(path + ": model.merges: expected an array");
  std::string text;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const auto fail = [&](const std::string& why) {
      throw InputError(path + ": model.merges[" + std::to_string(i) + "]: " + excerpt(m.dump()) + " " + why);
    };
    std::string_view left, right;
    if (m.is_string()) {  // tokenizers before 0.20: "LEFT RIGHT"
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail("is not two tokens split by one space");
      left = std::string_view(s).substr(0, space);
      right = std::string_view(s).substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // 0.20 on: [LEFT, RIGHT]
      left = m[0].get_ref<const std::string&>();
      right = m[1].get_ref<const std::string&>();
    } else {
      fail("is not a merge (\"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"])");
    }
    for (std::string_view token : {left, right})
      if (token.empty() || token.find_first_of(" \r\n") != std::string_view::npos)
        fail("has a token that is empty or holds a space or line break");
    text.append(left).append(" ").append(right).append("\n");
  }
  return text;
}

}  // namespace

std::string tokenizer_json_mismatch(const std::string& path, const json& t) {
  if (!t.is_object()) return path + ": not a JSON object";
  const std::string pre = type_of(field(t, "pre_tokenizer"));
  if (pre != "ByteLevel" && pre != "BertPreTokenizer")
    return path + ": pre_tokenizer: " + pre +
           " is not supported (ByteLevel for GPT-2's BPE, BertPreTokenizer for GPT-1's)";
  const bool gpt1 = pre == "BertPreTokenizer";
  std::string why = bpe_mismatch(field(t, "model"), gpt1);
  if (why.empty()) why = gpt1 ? bert_mismatch(t) : byte_level_mismatch(t);
  return why.empty() ? why : path + ": " + why;
}

TokenizerJsonBpe tokenizer_json_bpe(const std::string& path, const json& t) {
  TokenizerJsonBpe out;
  out.unsupported = tokenizer_json_mismatch(path, t);
  if (!out.unsupported.empty()) return out;
  const json& model = field(t, "model");
  if (!field(model, "vocab").is_object()) throw InputError(path + ": model.vocab: expected an object {token: id}");
  out.vocab_json = model.at("vocab").dump();
  out.merges_text = merges_text(path, field(model, "merges"));
  const std::string pre = type_of(field(t, "pre_tokenizer"));  // one of the two, as checked
  const bool spelled_as_gpt1 = tokenizer::vocab_spelling(out.vocab_json) == tokenizer::Spelling::Utf8;
  if (spelled_as_gpt1 != (pre == "BertPreTokenizer")) {
    out.unsupported = path + ": model.vocab is spelled as " +
                      (spelled_as_gpt1 ? "GPT-1's (words end in \"</w>\")" : "GPT-2's (bytes as characters)") +
                      " but the pre_tokenizer is " + pre;
    out.vocab_json.clear();
    out.merges_text.clear();
  }
  return out;
}

}  // namespace gptvk
