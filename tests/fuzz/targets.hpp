// The checks behind the libFuzzer targets (fuzz_*.cpp) and their corpus replay test
// (tests/test_fuzz_corpus.cpp). Each takes arbitrary bytes and either returns how the
// input was handled, accepted or rejected with an InputError, or breaks a stated
// invariant, which aborts with a message (a crash to libFuzzer, a failure to the test).
// Any other exception escapes on purpose: the CONTRACT allows only InputError for bad
// input, so libFuzzer reports a stray std::exception as a crash too.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.hpp"
#include "models/config.hpp"
#include "models/gguf_dequant.hpp"
#include "models/gguf_file.hpp"
#include "models/gguf_source.hpp"
#include "models/torch_pickle.hpp"
#include "models/torch_source.hpp"
#include "models/safetensors.hpp"
#include "models/tokenizer/bert_words.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "server/openai_request.hpp"

namespace gptvk::fuzz {

struct Outcome {
  bool rejected = false;  // an InputError was thrown
  std::string message;    // its text
};

[[noreturn]] inline void invariant_broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void require(bool ok, const std::string& what) {
  if (!ok) invariant_broken(what);
}

// A private directory for this process's scratch files (the parsers under test read
// paths, not memory), removed at exit. In memory (/dev/shm) unless TMPDIR says otherwise:
// a file rewritten per input on a disk costs the fuzzer most of its speed.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      const char* tmp = std::getenv("TMPDIR");
      std::string base = tmp && *tmp ? tmp : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
      std::string templ = base + "/gptvk-fuzz-XXXXXX";
      if (!mkdtemp(templ.data())) invariant_broken("cannot create a scratch directory under " + templ);
      path = templ;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

// Writes `data` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::span<const uint8_t> data) {
  std::string path = (scratch_dir() / name).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) invariant_broken("cannot write " + path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) invariant_broken("short write to " + path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

// SafetensorsFile::open on the bytes as a file. When it accepts, everything it claims
// must hold: each tensor lies inside the data area, its size matches shape x dtype, no
// two tensors overlap, and its bytes can be read (touched, so a bad offset faults here).
inline Outcome check_safetensors(std::span<const uint8_t> data) {
  std::string path = write_scratch("model.safetensors", data);
  SafetensorsFile f;
  try {
    f = SafetensorsFile::open(path);
  } catch (const InputError& e) {
    return {true, e.what()};
  }
  require(f.file_bytes() == data.size(), "file_bytes() differs from the file's size");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  const uint64_t data_len = data.size() - 8 - header_len;
  const std::byte* file_begin = reinterpret_cast<const std::byte*>(data.data());
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : f.tensors()) {
    require(t.begin <= t.end && t.end <= data_len, "tensor '" + t.name + "' outside the data area");
    require(f.find(t.name) == &t, "find() does not return tensor '" + t.name + "'");
    if (t.supported) {
      require(t.elements() * dtype_bytes(t.dtype) == t.bytes(), "tensor '" + t.name + "' size != shape x dtype");
      require(&f.get(t.name) == &t, "get() does not return tensor '" + t.name + "'");
    } else {
      try {
        (void)f.get(t.name);
        invariant_broken("get() accepted tensor '" + t.name + "' of dtype " + t.dtype_name);
      } catch (const InputError&) {
      }
    }
    std::span<const std::byte> bytes = f.data(t);
    require(bytes.size() == t.bytes(), "data() size differs for '" + t.name + "'");
    if (!bytes.empty()) {
      // Same bytes as the input at the offset the header claims (and readable).
      size_t at = 8 + header_len + t.begin;
      require(bytes.front() == file_begin[at] && bytes.back() == file_begin[at + t.bytes() - 1],
              "data() of '" + t.name + "' is not the bytes at its offsets");
      by_offset.push_back(&t);
    }
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    require(by_offset[i]->begin >= by_offset[i - 1]->end,
            "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  return {};
}

// load_config on the bytes as a TOML file. When it accepts, the config must be usable:
// positive dimensions, heads dividing the width, a weights file, custom names iff custom.
inline Outcome check_config(std::span<const uint8_t> data) {
  std::string path = write_scratch("config.toml", data);
  ModelConfig c;
  try {
    c = load_config(path);
  } catch (const InputError& e) {
    return {true, e.what()};
  }
  require(!c.name.empty(), "accepted a config without a name");
  require(c.vocab_size > 0 && c.context_length > 0 && c.emb_dim > 0 && c.n_heads > 0 && c.n_layers > 0 &&
              c.ffn_dim > 0,
          "accepted a zero dimension");
  require(c.emb_dim % c.n_heads == 0, "accepted n_heads that does not divide emb_dim");
  require(!c.weights_file.empty(), "accepted a config without a weights file");
  require(c.layout == "hf-gpt2" || c.layout == "custom", "accepted layout '" + c.layout + "'");
  require(c.layout == "custom" ? !c.names.empty() : c.names.empty(), "[weights.names] does not match the layout");
  require(std::isfinite(c.norm_eps) && c.norm_eps > 0, "accepted a non-positive norm_eps");
  require(c.tokenizer_vocab.empty() == c.tokenizer_merges.empty(), "half a [tokenizer] section accepted");
  return {};
}

// GgufFile::parse on the bytes (models/gguf_file.cpp). When it accepts, everything it
// claims must hold: each readable tensor lies inside the input at an aligned offset with
// as many bytes as its type and dimensions need, names are unique, and its bytes can be
// read (touched, and small quantized tensors dequantized). A gpt2 config built from it has
// usable dimensions and a tokenizer the vocabulary holds.
inline Outcome check_gguf(std::span<const uint8_t> data) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data.data()), data.size());
  GgufFile f;
  try {
    f = GgufFile::parse("fuzz.gguf", bytes);
  } catch (const InputError& e) {
    return {true, e.what()};
  }
  require(f.version() == 2 || f.version() == 3, "accepted GGUF version " + std::to_string(f.version()));
  std::vector<float> scratch;
  for (const GgufTensor& t : f.tensors()) {
    require(f.tensor(t.name) == &t, "tensor() does not return '" + t.name + "'");
    require(!t.ne.empty() && t.ne.size() <= 4, "tensor '" + t.name + "' has a bad number of dimensions");
    uint64_t block_values = 0, block_bytes = 0;
    if (!ggml::block_layout(t.type, block_values, block_bytes)) continue;
    require(t.bytes == t.elements() / block_values * block_bytes, "tensor '" + t.name + "' size != type x shape");
    std::span<const std::byte> d = f.data(t);
    require(d.data() >= bytes.data() && d.data() + d.size() <= bytes.data() + bytes.size(),
            "tensor '" + t.name + "' outside the input");
    if (!d.empty()) require(d.front() == d.front() && d.back() == d.back(), "unreadable");
    if (block_values > 1 && t.elements() <= (1u << 16)) {
      scratch.resize(t.elements());
      require(dequantize_ggml(t.type, d.data(), scratch.data(), t.elements()), "cannot dequantize '" + t.name + "'");
    }
  }
  ModelConfig c;
  try {
    c = gguf_model_config(f, DType::F16);
  } catch (const InputError& e) {
    return {true, e.what()};
  }
  require(c.vocab_size > 0 && c.context_length > 0 && c.emb_dim > 0 && c.n_heads > 0 && c.n_layers > 0 &&
              c.ffn_dim > 0 && c.emb_dim % c.n_heads == 0,
          "accepted unusable dimensions");
  require(std::isfinite(c.norm_eps) && c.norm_eps > 0, "accepted a bad layer_norm_epsilon");
  return {};
}

// open_torch_source on the bytes as a file (models/zip_archive.cpp, torch_pickle.cpp,
// torch_source.cpp): a zip of stored entries and a pickle read by the restricted unpickler.
// When it accepts, every tensor it lists is either refused by get() with an InputError or
// has exactly shape x dtype bytes inside the file, which can be read.
inline Outcome check_torch(std::span<const uint8_t> data) {
  std::string path = write_scratch("model.pt", data);
  std::unique_ptr<TensorSource> src;
  try {
    src = is_legacy_torch(std::as_bytes(data)) ? open_legacy_torch_source(path) : open_torch_source(path);
  } catch (const InputError& e) {
    return {true, e.what()};
  }
  const std::byte* begin = reinterpret_cast<const std::byte*>(data.data());
  for (const std::string& name : src->names()) {
    const TensorInfo* t = src->find(name);
    require(t != nullptr, "names() lists '" + name + "' but find() has none");
    try {
      (void)src->get(name);
    } catch (const InputError&) {
      require(!t->supported, "get() refused a loadable tensor '" + name + "'");
      continue;
    }
    std::span<const std::byte> d = src->data(*t);
    require(d.size() == t->elements() * dtype_bytes(t->dtype), "tensor '" + name + "' size != shape x dtype");
    require(t->begin + d.size() <= data.size(), "tensor '" + name + "' outside the file");
    // A view saved non-contiguous is gathered: only its first element is where begin says.
    if (!d.empty()) require(d.front() == begin[t->begin], "bytes differ");
  }
  return {};
}

// GPT-2's tokenizer from the files the project ships (loaded once per process).
inline const Tokenizer& gpt2_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/encoder.json",
                                               GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/vocab.bpe");
  return tok;
}

// GPT-2's with added tokens that overlap (" the", "heres", " there", ","), special and not,
// and one that takes the whitespace beside it along (" and", lstrip and rstrip).
inline const Tokenizer& gpt2_tokenizer_with_added() {
  static const Tokenizer tok = [] {
    auto read = [](const char* p) {
      std::ifstream in(p, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::vector<AddedToken> added = {
        {262, false}, {19079, false}, {612, true}, {11, true}, {290, false, true, true}};
    return Tokenizer::from_text("encoder.json", read(GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/encoder.json"),
                                "vocab.bpe", read(GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/vocab.bpe"), added);
  }();
  return tok;
}

// A GPT-1-style tokenizer (tests/fixtures/tokenizer/gpt1: 400 tokens, "<unk>" among them).
inline const Tokenizer& gpt1_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(GPTVK_SOURCE_DIR "/tests/fixtures/tokenizer/gpt1/vocab.json",
                                               GPTVK_SOURCE_DIR "/tests/fixtures/tokenizer/gpt1/merges.txt");
  return tok;
}

// GPT-1's: any bytes encode (a character outside the vocabulary is "<unk>"); without
// "<unk>" the ids decode to the normalized words, each followed by a space (merging keeps
// the text); streaming gives what decode() does.
inline void check_gpt1_tokenizer(std::string_view text) {
  const Tokenizer& tok = gpt1_tokenizer();
  const std::vector<uint32_t> ids = tok.encode(text);
  bool unknown = false;
  for (uint32_t id : ids) {
    require(id < tok.vocab_size(), "GPT-1 encode() gave id " + std::to_string(id));
    unknown |= tok.token_bytes(id) == "<unk>";
  }
  const std::string decoded = tok.decode(ids);
  if (!unknown) {
    std::string words;
    for (const std::string& w : tokenizer::bert_words(text)) words += w + " ";
    require(decoded == words, "GPT-1 decode(encode(x)) is not x's normalized words");
  }
  StreamDecoder stream(tok);
  std::string streamed;
  for (uint32_t id : ids) streamed += stream.feed(id);
  require(streamed + stream.flush() == decoded, "GPT-1 streamed decode differs from decode()");
}

// GPT-2's encode then decode gives back the input byte for byte, with and without special
// tokens, and streaming the ids one at a time gives the same bytes; GPT-1's as above.
inline Outcome check_tokenizer(std::span<const uint8_t> data) {
  const Tokenizer& tok = gpt2_tokenizer();
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  check_gpt1_tokenizer(text);
  for (bool special : {false, true}) {
    std::vector<uint32_t> ids = tok.encode(text, special);
    for (uint32_t id : ids) require(id < tok.vocab_size(), "encode() gave id " + std::to_string(id));
    require(tok.decode(ids) == text, std::string("decode(encode(x)) != x") + (special ? " with special tokens" : ""));
    if (!special) {
      StreamDecoder stream(tok);
      std::string streamed;
      for (uint32_t id : ids) streamed += stream.feed(id);
      streamed += stream.flush();
      require(streamed == text, "streamed decode differs from the input");
    }
    // With added tokens: ids in the vocabulary, and the input back but for the whitespace
    // beside " and", which it takes along.
    const Tokenizer& added = gpt2_tokenizer_with_added();
    std::vector<uint32_t> with = added.encode(text, special);
    for (uint32_t id : with) require(id < added.vocab_size(), "encode() with added tokens gave id " + std::to_string(id));
    if (text.find(" and") == std::string_view::npos)
      require(added.decode(with) == text, std::string("with added tokens, decode(encode(x)) != x") +
                                              (special ? " with special tokens" : ""));
  }
  return {};
}

// A request body for POST /v1/completions and /v1/chat/completions, as the server reads it
// (server/openai_request.hpp's parse_body, then its request parsers): it is accepted,
// or refused with an ApiError of HTTP status 400 whose error body serialises, never with
// another exception (the server would answer those 500, or a bare "malformed request").
// An accepted request holds 1-64 prompts of ids inside the vocabulary, each leaving room
// for max_tokens in the context, and 1-16 choices.
inline Outcome check_openai_request(std::span<const uint8_t> data) {
  constexpr uint32_t kContext = 1024;
  const Tokenizer& tok = gpt2_tokenizer();
  server::json body;
  try {
    body = server::parse_body(std::string(data.begin(), data.end()));
  } catch (const server::ApiError& e) {
    require(e.status == 400, "a body refused with " + std::to_string(e.status));
    return {true, e.what()};
  }
  Outcome out{true, ""};  // rejected: by both endpoints
  for (bool chat : {false, true}) {
    out.message += chat ? "; chat: " : "completions: ";
    try {
      const server::CompletionRequest r = chat ? server::parse_chat_request(body, tok, kContext)
                                               : server::parse_completion_request(body, tok, kContext);
      require(!r.prompts.empty() && r.prompts.size() <= 64 && r.prompts.size() == r.prompt_texts.size(),
              "an accepted request has " + std::to_string(r.prompts.size()) + " prompts");
      require(r.n >= 1 && r.n <= 16, "an accepted request has n = " + std::to_string(r.n));
      for (const auto& ids : r.prompts) {
        require(!ids.empty() && ids.size() + r.sampling.options.max_tokens <= kContext,
                "an accepted prompt of " + std::to_string(ids.size()) + " tokens and max_tokens " +
                    std::to_string(r.sampling.options.max_tokens) + " does not fit the context");
        for (uint32_t id : ids) require(id < tok.vocab_size(), "an accepted prompt holds id " + std::to_string(id));
      }
      out.rejected = false;
      out.message += "accepted";
    } catch (const server::ApiError& e) {
      require(e.status == 400, "a bad request answered " + std::to_string(e.status));
      require(!std::string(e.what()).empty(), "an ApiError without a message");
      (void)server::error_body(e).dump();  // the answer's body: throws on text that is not UTF-8
      out.message += e.what();
    }
  }
  return out;
}

}  // namespace gptvk::fuzz
