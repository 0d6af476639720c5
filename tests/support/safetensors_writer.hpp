// Writes safetensors files for the tests. Tensors are laid out in
// the order they were added, the header padded with spaces to a multiple of 8 bytes as
// the reference implementation does, so every tensor's data is 8-byte aligned.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/dtype.hpp"

namespace gptvk {

class SafetensorsWriter {
 public:
  // Adds a tensor whose `data` holds prod(shape) values of `dtype`.
  void add(const std::string& name, DType dtype, const std::vector<uint64_t>& shape, const void* data);
  // Adds f32 values stored as `dtype` (converted, round-to-nearest-even).
  void add_f32(const std::string& name, DType dtype, const std::vector<uint64_t>& shape,
               const std::vector<float>& values);
  // Adds raw bytes under any dtype string ("I64", "BOOL", ...); nothing is checked.
  void add_raw(const std::string& name, const std::string& dtype, const std::vector<uint64_t>& shape,
               const std::string& bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  std::string header_json() const;            // the JSON header, unpadded
  std::string bytes() const;                  // the whole file
  void write(const std::string& path) const;  // throws InputError when the file cannot be written

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries_;
  std::string data_;
  std::map<std::string, std::string> metadata_;
};

const char* safetensors_dtype(DType t);  // "F32" | "F16" | "BF16"

}  // namespace gptvk
