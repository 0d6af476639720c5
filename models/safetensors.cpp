#include "models/safetensors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <memory>
#include <set>
#include <utility>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/truncation_guard.hpp"

namespace gptvk {

namespace {

// Bytes per element of every dtype the safetensors format defines; the ones we cannot
// load still need a size so their offsets can be checked.
uint64_t element_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// a * b, or false when it overflows 64 bits.
bool mul_checked(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

// Checks the header's shape in one streaming pass before the document is built, so that a
// hostile header fails at the first sign rather than after building a huge document: a
// name given twice (JSON lets the last win, which would load bytes the writer never
// meant), nesting deeper than {name: {"shape": [..]}}, more tensors than any model has, or
// a shape of more dimensions than any tensor has.
// (A SAX pass, not nlohmann's parser callback: that rescans each object as it closes,
// quadratic in the number of tensors.) Malformed JSON is left to the real parse to word.
class HeaderShapeCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HeaderShapeCheck(const std::string& path) : path_(path) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return --depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& name) override {
    if (depth_ != 1) return true;
    if (!names_.insert(name).second) throw InputError(path_ + ": tensor '" + name + "' is listed twice in the header");
    if (names_.size() > SafetensorsFile::kMaxTensors)
      throw InputError(path_ + ": header lists more than " + std::to_string(SafetensorsFile::kMaxTensors) +
                       " tensors");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  static constexpr int kMaxRank = 8;
  bool open() {
    if (++depth_ > 3)
      throw InputError(path_ + ": JSON header nests deeper than a safetensors header (name: {shape: [...]})");
    items_ = 0;
    return true;
  }
  // A value inside a tensor's shape or data_offsets (the only arrays at depth 3).
  bool value() {
    if (depth_ == 3 && ++items_ > kMaxRank)
      throw InputError(path_ + ": a tensor's shape has more than " + std::to_string(kMaxRank) + " dimensions");
    return true;
  }
  const std::string& path_;
  int depth_ = 0;
  int items_ = 0;  // values in the current depth-3 array
  std::set<std::string> names_;
};

}  // namespace

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TensorInfo::shape_str() const { return gptvk::shape_str(shape); }

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  // Non-blocking open, then only a regular file: a FIFO or a device is refused by name.
  uint64_t size = 0;
  files::Fd fd = files::open_regular(path, path + ": cannot open weights file: ", UINT64_MAX, size);
  if (size < 8)
    throw InputError(path + ": " + (size == 0 ? std::string("empty file") : std::to_string(size) + "-byte file") +
                     ", not safetensors (it starts with an 8-byte header length)");
  f.map_ = files::map_fd(fd, size, path + ": cannot map weights file: ");

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<uint64_t>(f.map_.bytes[i]);
  if (header_len > size - 8)
    throw InputError(path + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                     std::to_string(size) + " bytes): truncated or not safetensors");
  if (header_len > kMaxHeaderBytes)
    throw InputError(path + ": header of " + std::to_string(header_len) + " bytes, more than the " +
                     std::to_string(kMaxHeaderBytes >> 20) + " MiB safetensors allows: corrupt or not safetensors");
  f.data_start_ = 8 + header_len;
  if (!run_catching_sigbus([&] { f.parse_header(header_len); }))
    throw InputError(path + ": file changed or truncated while loading (reading the header)");
  return f;
}

void SafetensorsFile::parse_header(uint64_t header_len) {
  const char* text = reinterpret_cast<const char*>(map_.bytes.data() + 8);
  nlohmann::json header;
  try {
    HeaderShapeCheck shape_check(path_);
    nlohmann::json::sax_parse(text, text + header_len, &shape_check);
    header = nlohmann::json::parse(text, text + header_len);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message ends with the token it last read, which can be the whole header.
    throw InputError(path_ + ": malformed JSON header: " + excerpt(e.what(), 240));
  }
  if (!header.is_object()) throw InputError(path_ + ": JSON header is not an object");

  const uint64_t data_len = map_.bytes.size() - data_start_;
  for (auto& item : header.items()) {
    // Named references, not a structured binding: clang before 16 cannot capture a
    // structured binding in the lambda below, and the fuzz build (tests/fuzz) uses clang.
    const std::string& name = item.key();
    auto& entry = item.value();
    auto bad = [&](const std::string& what) -> InputError {
      return InputError(path_ + ": tensor '" + name + "': " + what);
    };
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path_ + ": __metadata__ is not an object");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw InputError(path_ + ": __metadata__ value for '" + k + "' is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) throw bad("header entry is not an object");
    TensorInfo t;
    t.name = name;
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) throw bad("no dtype string");
    t.dtype_name = dt->get<std::string>();
    uint64_t esize = element_bytes(t.dtype_name);
    if (!esize) throw bad("unknown dtype '" + t.dtype_name + "'");
    t.supported = t.dtype_name == "F32" || t.dtype_name == "F16" || t.dtype_name == "BF16";
    if (t.supported) t.dtype = t.dtype_name == "F32" ? DType::F32 : t.dtype_name == "F16" ? DType::F16 : DType::BF16;

    auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) throw bad("no shape array");
    uint64_t n = 1;
    for (auto& d : *shape) {
      if (!d.is_number_unsigned()) throw bad("shape " + shape->dump() + " is not a list of non-negative integers");
      t.shape.push_back(d.get<uint64_t>());
      if (!mul_checked(n, t.shape.back(), n)) throw bad("shape " + t.shape_str() + " overflows");
    }
    auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      throw bad("data_offsets is not a pair of non-negative integers");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end)
      throw bad("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") are reversed");
    if (t.end > data_len)
      throw bad("data [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                ") runs past the end of the data area (" + std::to_string(data_len) + " bytes): file truncated?");
    uint64_t want = 0;
    if (!mul_checked(n, esize, want) || want != t.bytes())
      throw bad("shape " + t.shape_str() + " of " + t.dtype_name + " needs " + std::to_string(want) +
                " bytes but data_offsets span " + std::to_string(t.bytes()) + " bytes");
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // No two tensors may share bytes: a header that overlaps them lies about at least one.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors_)
    if (t.bytes()) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw InputError(path_ + ": tensor '" + by_offset[i]->name + "' overlaps tensor '" + by_offset[i - 1]->name +
                       "' in the data area");
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) throw InputError(path_ + ": tensor '" + std::string(name) + "' not found");
  if (!t->supported)
    throw InputError(path_ + ": tensor '" + t->name + "' has dtype " + t->dtype_name +
                     "; only F32, F16 and BF16 weights are supported");
  return *t;
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
  return map_.bytes.subspan(data_start_ + t.begin, static_cast<size_t>(t.bytes()));
}

void SafetensorsFile::release(const TensorInfo& t) const {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t first = (data_start_ + t.begin + page - 1) / page * page;  // whole pages inside the tensor
  uint64_t last = (data_start_ + t.end) / page * page;
  if (last > first) madvise(const_cast<std::byte*>(map_.bytes.data()) + first, last - first, MADV_DONTNEED);
}

}  // namespace gptvk
