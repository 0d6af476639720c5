// A read-only view of a GGUF file (llama.cpp's format, versions 2 and 3): the metadata
// key/value pairs and the tensor directory, memory-mapped. parse() trusts nothing: every
// count, string length, array length, dimension, offset and the alignment is checked
// against the bytes that are there before anything is read or allocated, so a truncated
// file or a lying header is an InputError naming the file and the cause, never a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk {

// GGUF's metadata value types (gguf.h's gguf_type).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12
};

struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem_type = GgufType::U8;  // for arrays
  // Scalars: integers (and bools) in `i` (unsigned 64-bit values above INT64_MAX in `u`),
  // floats in `f`.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  // Arrays, `count` elements: of strings in `strings`, of numbers in `elements` (their bytes
  // in the file, read by number(i)); both views of the file's bytes, which no copy of a
  // long array then multiplies. Nested arrays are read over and kept as a count only.
  std::vector<std::string_view> strings;
  std::span<const std::byte> elements;
  uint64_t count = 0;
  bool is_integer() const;
  // Element i < count of an array of numbers (or bools), as a double.
  double number(uint64_t i) const;
};

// ggml's tensor types; the ones gpt-vk reads have a block layout below.
namespace ggml {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
                   Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30;
// The name of type `t` ("Q4_K"), or "" when ggml has no such type.
const char* type_name(uint32_t t);
// Values per block and bytes per block of the types gpt-vk reads; false for the others.
bool block_layout(uint32_t t, uint64_t& block_values, uint64_t& block_bytes);
}  // namespace ggml

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // ne[0] varies fastest (ggml's order)
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;   // 0 when the type's layout is unknown here (then it cannot be read)
  uint64_t elements() const;
};

class GgufFile {
 public:
  // Maps and parses `path`.
  static GgufFile open(const std::string& path);
  // Parses bytes held elsewhere (they must outlive the result); `path` names them in errors.
  static GgufFile parse(const std::string& path, std::span<const std::byte> bytes);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const GgufValue* find(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;
  std::span<const std::byte> data(const GgufTensor& t) const;

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;  // keeps an open()ed file mapped
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, GgufValue, std::less<>> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  friend class GgufParser;
};

}  // namespace gptvk
