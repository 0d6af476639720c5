#include "models/gguf_file.hpp"

#include <algorithm>
#include <cstring>

#include "engine/error.hpp"
#include "engine/files.hpp"

namespace gptvk {

namespace {

// Far above any real model (GPT-2 XL has 580 tensors and ~30 keys), low enough that a
// lying count fails on its own before it can make us allocate.
constexpr uint64_t kMaxTensors = 1 << 20;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

struct TypeInfo {
  uint32_t id;
  const char* name;
  uint64_t block_values, block_bytes;  // 0, 0: a type gpt-vk does not read
};

constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},      {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},  {6, "Q5_0", 32, 22},
    {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 0, 0},     {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 0, 0}, {16, "IQ2_XXS", 0, 0},
    {17, "IQ2_XS", 0, 0},  {18, "IQ3_XXS", 0, 0}, {19, "IQ1_S", 0, 0},   {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 0, 0},
    {22, "IQ2_S", 0, 0},   {23, "IQ4_XS", 256, 136},  {24, "I8", 0, 0},      {25, "I16", 0, 0},    {26, "I32", 0, 0},
    {27, "I64", 0, 0},     {28, "F64", 0, 0},     {29, "IQ1_M", 0, 0},   {30, "BF16", 1, 2},   {34, "TQ1_0", 0, 0},
    {35, "TQ2_0", 0, 0},   {39, "MXFP4", 0, 0}};

const TypeInfo* type_info(uint32_t t) {
  for (const auto& i : kTypes)
    if (i.id == t) return &i;
  return nullptr;
}

bool mul_ok(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

}  // namespace

namespace ggml {
const char* type_name(uint32_t t) {
  const TypeInfo* i = type_info(t);
  return i ? i->name : "";
}
bool block_layout(uint32_t t, uint64_t& block_values, uint64_t& block_bytes) {
  const TypeInfo* i = type_info(t);
  if (!i || !i->block_values) return false;
  block_values = i->block_values;
  block_bytes = i->block_bytes;
  return true;
}
}  // namespace ggml

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16: case GgufType::U32:
    case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

namespace {
template <typename T>
double element(std::span<const std::byte> bytes, uint64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}
}  // namespace

double GgufValue::number(uint64_t i) const {
  if (type != GgufType::Array || i >= count) throw std::out_of_range("GgufValue::number: not an element");
  switch (elem_type) {
    case GgufType::U8: case GgufType::Bool: return element<uint8_t>(elements, i);
    case GgufType::I8: return element<int8_t>(elements, i);
    case GgufType::U16: return element<uint16_t>(elements, i);
    case GgufType::I16: return element<int16_t>(elements, i);
    case GgufType::U32: return element<uint32_t>(elements, i);
    case GgufType::I32: return element<int32_t>(elements, i);
    case GgufType::U64: return element<uint64_t>(elements, i);
    case GgufType::I64: return element<int64_t>(elements, i);
    case GgufType::F32: return element<float>(elements, i);
    case GgufType::F64: return element<double>(elements, i);
    default: throw std::out_of_range("GgufValue::number: not an array of numbers");
  }
}

uint64_t GgufTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // checked for overflow when parsed
  return n;
}

// Reads the header front to back; every read first checks that the bytes are there.
class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), b_(f.bytes_) {}

  void run() {
    if (b_.size() < 4 || std::memcmp(b_.data(), "GGUF", 4) != 0) fail("not a GGUF file (no 'GGUF' magic)");
    pos_ = 4;
    f_.version_ = u32("the version");
    if (f_.version_ == 1) fail("GGUF version 1 is not supported (versions 2 and 3 are): convert the model again");
    if (f_.version_ > 0xffff) fail("big-endian GGUF (version field " + std::to_string(f_.version_) + ") is not supported");
    if (f_.version_ != 2 && f_.version_ != 3)
      fail("GGUF version " + std::to_string(f_.version_) + " is not supported (versions 2 and 3 are)");
    const uint64_t n_tensors = u64("the tensor count");
    const uint64_t n_kv = u64("the metadata count");
    // Each key/value takes at least 13 bytes, each tensor entry at least 28.
    if (n_kv > remaining() / 13)
      fail("metadata count " + std::to_string(n_kv) + " does not fit in the file: truncated or a lying header");
    if (n_tensors > kMaxTensors || n_tensors > remaining() / 28)
      fail("tensor count " + std::to_string(n_tensors) + " does not fit in the file: truncated or a lying header");
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key = str("a metadata key");
      GgufValue v = value(key, static_cast<GgufType>(u32("the type of '" + excerpt(key) + "'")), 0);
      if (!f_.kv_.emplace(key, std::move(v)).second) fail("metadata key '" + excerpt(key) + "' appears twice");
    }
    uint64_t alignment = 32;
    if (const GgufValue* a = f_.find("general.alignment")) {
      if (a->type != GgufType::U32 || a->i == 0 || (a->i & (a->i - 1)))
        fail("general.alignment must be a power of two (u32)");
      alignment = static_cast<uint64_t>(a->i);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) tensor_info(alignment);
    f_.data_start_ = (pos_ + alignment - 1) / alignment * alignment;
    if (n_tensors && f_.data_start_ > b_.size())
      fail("the tensor data would start at byte " + std::to_string(f_.data_start_) + ", past the end of the file (" +
           std::to_string(b_.size()) + " bytes): truncated");
    // Writers (gguf-py, ggml) pad to the data with zeros. Other bytes there mean the header
    // ended early: a tensor count lowered by one leaves the last tensor entry's first bytes
    // here, and every tensor would be read from the wrong place.
    for (uint64_t p = pos_; p < std::min<uint64_t>(f_.data_start_, b_.size()); ++p)
      if (b_[p] != std::byte{0})
        fail("byte " + std::to_string(p) + ", in the padding before the tensor data, is not zero: the header "
             "ends early (a lying tensor or metadata count)");
    const uint64_t data_len = b_.size() - std::min<uint64_t>(b_.size(), f_.data_start_);
    // Every offset, even of an empty tensor or one of a type gpt-vk cannot size, lies in the file.
    for (const GgufTensor& t : f_.tensors_)
      if (t.offset > data_len || t.bytes > data_len - t.offset)
        fail("tensor '" + t.name + "' (" + std::to_string(t.bytes) + " bytes at data offset " +
             std::to_string(t.offset) + ") runs past the end of the file: truncated");
    check_no_overlap();
  }

 private:
  // No two tensors may share bytes (as in safetensors): weights aliased onto each other
  // would load without a word, and a header that overlaps them lies about at least one.
  void check_no_overlap() const {
    std::vector<const GgufTensor*> by_offset;
    for (const GgufTensor& t : f_.tensors_)
      if (t.bytes) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes)
        fail("tensor '" + by_offset[i]->name + "' overlaps tensor '" + by_offset[i - 1]->name +
             "' in the data area: a lying header");
  }

  [[noreturn]] void fail(const std::string& what) const { throw InputError(f_.path_ + ": " + what); }
  uint64_t remaining() const { return b_.size() - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      fail("file ends at byte " + std::to_string(b_.size()) + " while reading " + what + ": truncated");
  }
  template <typename T>
  T scalar(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const std::string& what) { return scalar<uint32_t>(what); }
  uint64_t u64(const std::string& what) { return scalar<uint64_t>(what); }
  std::string_view str_view(const std::string& what) {
    uint64_t n = u64(what);
    if (n > remaining()) fail("the length " + std::to_string(n) + " of " + what + " runs past the end of the file");
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::string str(const std::string& what) { return std::string(str_view(what)); }

  static uint64_t scalar_size(GgufType t) {
    switch (t) {
      case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
      case GgufType::U16: case GgufType::I16: return 2;
      case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
      case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
      default: return 0;
    }
  }

  void read_scalar(GgufType t, GgufValue& v, const std::string& what) {
    switch (t) {
      case GgufType::U8: v.i = scalar<uint8_t>(what); break;
      case GgufType::I8: v.i = scalar<int8_t>(what); break;
      case GgufType::U16: v.i = scalar<uint16_t>(what); break;
      case GgufType::I16: v.i = scalar<int16_t>(what); break;
      case GgufType::U32: v.i = scalar<uint32_t>(what); break;
      case GgufType::I32: v.i = scalar<int32_t>(what); break;
      case GgufType::U64: v.u = scalar<uint64_t>(what); v.i = static_cast<int64_t>(std::min<uint64_t>(v.u, INT64_MAX)); break;
      case GgufType::I64: v.i = scalar<int64_t>(what); break;
      case GgufType::F32: v.f = scalar<float>(what); break;
      case GgufType::F64: v.f = scalar<double>(what); break;
      case GgufType::Bool: {
        uint8_t b = scalar<uint8_t>(what);
        if (b > 1) fail(what + ": a bool must be 0 or 1, got " + std::to_string(b));
        v.i = b;
        break;
      }
      default: fail(what + ": unknown value type " + std::to_string(uint32_t(t)));
    }
    v.f = v.is_integer() || t == GgufType::Bool ? double(v.i) : v.f;
  }

  GgufValue value(const std::string& key, GgufType t, int depth) {
    GgufValue v;
    v.type = t;
    // Built for every element of an array of arrays: the key's start, not a megabyte of it.
    const std::string what = "the value of '" + excerpt(key) + "'";
    if (t == GgufType::String) {
      v.s = str(what);
    } else if (t == GgufType::Array) {
      if (depth > 2) fail(what + ": arrays nested too deeply");
      v.elem_type = static_cast<GgufType>(u32(what));
      v.count = u64(what);
      const uint64_t min_size = v.elem_type == GgufType::String ? 8 : v.elem_type == GgufType::Array ? 12
                                                                                                       : scalar_size(v.elem_type);
      if (!min_size) fail(what + ": unknown array element type " + std::to_string(uint32_t(v.elem_type)));
      if (v.count > remaining() / min_size)
        fail(what + ": array of " + std::to_string(v.count) + " elements runs past the end of the file");
      if (v.elem_type == GgufType::String) {
        for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(str_view(what));
      } else if (v.elem_type == GgufType::Array) {
        for (uint64_t k = 0; k < v.count; ++k) (void)value(key, GgufType::Array, depth + 1);
      } else {  // numbers, in place (the count fits the bytes left, checked above)
        v.elements = b_.subspan(pos_, v.count * min_size);
        if (v.elem_type == GgufType::Bool)
          for (uint64_t k = 0; k < v.count; ++k)
            if (v.elements[k] > std::byte{1})
              fail(what + ": a bool must be 0 or 1, got " + std::to_string(uint8_t(v.elements[k])));
        pos_ += v.elements.size();
      }
    } else {
      read_scalar(t, v, what);
    }
    return v;
  }

  void tensor_info(uint64_t alignment) {
    GgufTensor t;
    t.name = str("a tensor name");
    const std::string what = "tensor '" + excerpt(t.name) + "'";
    const uint32_t n_dims = u32(what);
    if (n_dims == 0 || n_dims > kMaxDims)
      fail(what + " has " + std::to_string(n_dims) + " dimensions (1 to " + std::to_string(kMaxDims) + " allowed)");
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne.push_back(u64(what));
      if (!mul_ok(n, t.ne.back(), n) || n > (uint64_t(1) << 62)) fail(what + ": its dimensions overflow");
    }
    t.type = u32(what);
    t.offset = u64(what);
    const TypeInfo* ti = type_info(t.type);
    if (!ti) fail(what + " has unknown tensor type " + std::to_string(t.type));
    if (t.offset % alignment)
      fail(what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
           std::to_string(alignment));
    if (ti->block_values) {
      if (t.ne[0] % ti->block_values)
        fail(what + ": " + ti->name + " needs rows of a multiple of " + std::to_string(ti->block_values) +
             " values, got " + std::to_string(t.ne[0]));
      if (!mul_ok(n / ti->block_values, ti->block_bytes, t.bytes)) fail(what + ": its size overflows");
    }
    if (!f_.index_.emplace(t.name, f_.tensors_.size()).second) fail(what + " appears twice");
    f_.tensors_.push_back(std::move(t));
  }

  GgufFile& f_;
  std::span<const std::byte> b_;
  uint64_t pos_ = 0;
};

GgufFile GgufFile::parse(const std::string& path, std::span<const std::byte> bytes) {
  GgufFile f;
  f.path_ = path;
  f.bytes_ = bytes;
  GgufParser(f).run();
  return f;
}

GgufFile GgufFile::open(const std::string& path) {
  files::MappedFile mapped = files::map_regular(path);
  GgufFile f = parse(path, mapped.bytes);
  f.mapping_ = std::move(mapped.keep);
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::data(const GgufTensor& t) const {
  return bytes_.subspan(data_start_ + t.offset, t.bytes);
}

}  // namespace gptvk
