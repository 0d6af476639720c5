#include "models/weights_source.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/error.hpp"
#include "models/gguf_source.hpp"
#include "models/hf_snapshot.hpp"
#include "models/torch_pickle.hpp"
#include "models/torch_source.hpp"

namespace gptvk {

namespace fs = std::filesystem;

const TensorInfo& TensorSource::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) throw InputError(path() + ": tensor '" + std::string(name) + "' not found");
  // (A GGUF tensor with a 0 dimension holds no values: not a matter of its type.)
  if (!t->supported && t->elements() == 0)
    throw InputError(path() + ": tensor '" + std::string(name) + "' has shape " + t->shape_str() + ": no values");
  if (!t->supported)
    throw InputError(path() + ": tensor '" + std::string(name) + "' has type " + t->dtype_name +
                     " (gpt-vk loads F32, F16 and BF16" + (sniff_format(path()) == FileFormat::Gguf
                                                              ? std::string(" and GGUF's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                                                                            "Q2_K to Q6_K, IQ4_NL and IQ4_XS")
                                                              : std::string()) +
                     ")");
  return *t;
}

namespace {

std::string read_start(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

class SafetensorsSource : public TensorSource {
 public:
  explicit SafetensorsSource(SafetensorsFile f) : file_(std::move(f)) {}
  const std::string& path() const override { return file_.path(); }
  const TensorInfo* find(std::string_view name) const override { return file_.find(name); }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& t : file_.tensors()) n.push_back(t.name);
    return n;
  }
  const TensorInfo& get(std::string_view name) const override { return file_.get(name); }
  std::span<const std::byte> data(const TensorInfo& t) const override { return file_.data(t); }
  void release(const TensorInfo& t) const override { file_.release(t); }

 private:
  SafetensorsFile file_;
};

class JoinedSource : public TensorSource {
 public:
  JoinedSource(std::string path, std::vector<std::unique_ptr<TensorSource>> parts)
      : path_(std::move(path)), parts_(std::move(parts)) {
    for (const auto& p : parts_)
      for (const std::string& n : p->names())
        if (!owner_.emplace(n, p.get()).second)
          throw InputError(path_ + ": tensor '" + n + "' is in two shards (" + owner_.at(n)->path() + " and " +
                           p->path() + ")");
  }
  const std::string& path() const override { return path_; }
  const TensorInfo* find(std::string_view name) const override {
    auto it = owner_.find(name);
    return it == owner_.end() ? nullptr : it->second->find(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& [k, v] : owner_) n.push_back(k);
    return n;
  }
  const TensorInfo& get(std::string_view name) const override {
    auto it = owner_.find(name);
    if (it == owner_.end()) throw InputError(path_ + ": tensor '" + std::string(name) + "' not found in any shard");
    return it->second->get(name);
  }
  std::span<const std::byte> data(const TensorInfo& t) const override { return owner_.at(t.name)->data(t); }
  void release(const TensorInfo& t) const override { owner_.at(t.name)->release(t); }

 private:
  std::string path_;
  std::vector<std::unique_ptr<TensorSource>> parts_;
  std::map<std::string, const TensorSource*, std::less<>> owner_;
};

// Whether text looks like TOML: past blank and '#' comment lines, a "[table]" header or a
// "key = " line (a config given as weights; the shipped ones open with comments).
bool looks_like_toml(std::string_view s) {
  size_t i = 0;
  for (;;) {
    i = s.find_first_not_of(" \t\r\n", i);
    if (i == std::string_view::npos) return false;
    if (s[i] != '#') break;
    i = s.find('\n', i);
  }
  constexpr std::string_view kBare = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
  if (s[i] == '[') {
    size_t close = s.find_first_not_of(std::string(kBare) + ".", i + 1);
    return close != std::string_view::npos && close > i + 1 && s[close] == ']';
  }
  size_t key_end = s.find_first_not_of(kBare, i);
  if (key_end == i || key_end == std::string_view::npos) return false;
  size_t eq = s.find_first_not_of(" \t", key_end);
  return eq != std::string_view::npos && s[eq] == '=';
}

// What a file that is none of the weight formats probably is, from its first bytes.
std::string guess_kind(const std::string& s) {
  auto starts = [&](std::string_view p) { return s.compare(0, p.size(), p) == 0; };
  if (s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x80 && s[1] >= 2 && s[1] <= 5)
    return "a Python pickle, but not one torch.save writes (no magic number)";
  // The legacy format's magic number as protocols 0 and 1 pickle it (LONG's decimal text).
  if (starts("L119547037146038801333356L\n"))
    return "a torch.save file of the legacy format at pickle protocol 0 or 1, which gpt-vk does not read: "
           "torch.load it and torch.save it again";
  if (starts("lmgg") || starts("tjgg") || starts("fmgg")) return "a pre-GGUF GGML file: convert it to GGUF";
  if (starts("\x89HDF")) return "an HDF5 file (Keras/TensorFlow weights)";
  if (starts("\x93NUMPY")) return "a NumPy .npy array";
  if (starts("version https://git-lfs")) return "a Git LFS pointer, not the file itself: run git lfs pull";
  if (looks_like_toml(s)) return "TOML text: a config? give it as --config";
  size_t i = s.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && (s[i] == '{' || s[i] == '[')) return "JSON text";
  if (i != std::string::npos && s[i] == '<') return "HTML or XML text (a download error page?)";
  return "";
}

}  // namespace

FileFormat sniff_format(const std::string& path) {
  std::string s = read_start(path, 32);  // room for the legacy torch.save magic-number pickle
  if (s.size() >= 4 && s.compare(0, 4, "GGUF") == 0) return FileFormat::Gguf;
  if (is_legacy_torch({reinterpret_cast<const std::byte*>(s.data()), s.size()})) return FileFormat::TorchLegacy;
  // Any zip: the torch.save reader says what is wrong with one that is not (or is damaged).
  // (An empty zip is its end record alone.)
  if (s.size() >= 4 && (s.compare(0, 4, "PK\x03\x04") == 0 || s.compare(0, 4, "PK\x05\x06") == 0))
    return FileFormat::TorchZip;
  // safetensors: an 8-byte little-endian header length, then the JSON header's '{'. A
  // length whose top two bytes are zero (no text file starts so) is taken as a damaged
  // safetensors file, so that its reader says what is wrong with it; so is a file too
  // short to tell.
  if (s.size() < 8) return FileFormat::Safetensors;
  if ((s.size() >= 9 && s[8] == '{') || (s[6] == 0 && s[7] == 0)) return FileFormat::Safetensors;
  return FileFormat::Unknown;
}

std::string describe_file_start(const std::string& path) {
  std::string s = read_start(path, 1024);  // room for a config's opening comments
  if (s.empty()) return "an empty file";
  std::string hex;
  for (size_t i = 0; i < s.size() && i < 8; ++i) {
    char b[4];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(s[i]));
    if (i) hex += ' ';
    hex += b;
  }
  std::string kind = guess_kind(s);
  return "starts with bytes " + hex + (s.size() > 8 ? " ..." : "") + (kind.empty() ? "" : " (" + kind + ")");
}

std::unique_ptr<TensorSource> safetensors_source(SafetensorsFile file) {
  return std::make_unique<SafetensorsSource>(std::move(file));
}

std::unique_ptr<TensorSource> joined_source(std::string path, std::vector<std::unique_ptr<TensorSource>> parts) {
  return std::make_unique<JoinedSource>(std::move(path), std::move(parts));
}

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return open_snapshot_weights(path);
  // Missing files, FIFOs, devices: the safetensors reader's messages (engine/files), and no
  // read of their first bytes, which could block.
  if (!fs::is_regular_file(path, ec)) return safetensors_source(SafetensorsFile::open(path));
  switch (sniff_format(path)) {
    case FileFormat::Safetensors:
      return safetensors_source(SafetensorsFile::open(path));
    case FileFormat::Gguf:
      return open_gguf_source(path);
    case FileFormat::TorchZip:
      return open_torch_source(path);
    case FileFormat::TorchLegacy:
      return open_legacy_torch_source(path);
    case FileFormat::Unknown:
      break;
  }
  throw InputError(path + ": not safetensors, GGUF or a torch.save file: " + describe_file_start(path));
}

}  // namespace gptvk
