// A read-only view of a safetensors file (8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the data),
// memory-mapped so that loading a model never holds a second copy of it in host memory.
// open() checks everything the header claims against the file before anything is read:
// a truncated file or a lying header is an InputError naming the file and the tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/files.hpp"

namespace gptvk {

struct TensorInfo {
  std::string name;
  std::string dtype_name;  // as in the file: "F32", "BF16", "I64", ...
  bool supported = false;  // dtype is F32, F16 or BF16 (then `dtype` is meaningful)
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data area

  uint64_t elements() const;
  uint64_t bytes() const { return end - begin; }
  std::string shape_str() const;  // "[768, 2304]"
};

std::string shape_str(const std::vector<uint64_t>& shape);

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws InputError on any inconsistency.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile() = default;
  SafetensorsFile(SafetensorsFile&& other) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Null when absent. Tensors of other dtypes (masks, int buffers) are listed but not
  // `supported`: files that carry them still load as long as nothing reads them.
  const TensorInfo* find(std::string_view name) const;
  // The tensor, or an InputError naming it when it is absent or not F32/F16/BF16.
  const TensorInfo& get(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's raw bytes inside the mapping (valid while this object lives).
  std::span<const std::byte> data(const TensorInfo& t) const;
  // Tells the kernel the tensor's pages are no longer needed (they are clean file pages,
  // dropped from this process's resident set, re-read if touched again).
  void release(const TensorInfo& t) const;

  uint64_t file_bytes() const { return map_.bytes.size(); }

  // Limits on what a header may claim. Hugging Face's reader caps headers at 100 MB too;
  // the largest models have tens of thousands of tensors.
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
  static constexpr size_t kMaxTensors = 1u << 16;

 private:
  void parse_header(uint64_t header_len);
  std::string path_;
  files::MappedFile map_;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace gptvk
