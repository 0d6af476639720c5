#include "tests/support/safetensors_writer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.hpp"

namespace gptvk {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
  }
  return "?";
}

void SafetensorsWriter::add(const std::string& name, DType dtype, const std::vector<uint64_t>& shape,
                            const void* data) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::string bytes;
  if (n) bytes.assign(static_cast<const char*>(data), static_cast<size_t>(n * dtype_bytes(dtype)));
  add_raw(name, safetensors_dtype(dtype), shape, bytes);
}

void SafetensorsWriter::add_f32(const std::string& name, DType dtype, const std::vector<uint64_t>& shape,
                                const std::vector<float>& values) {
  std::string buf(values.size() * dtype_bytes(dtype), '\0');
  convert(values.data(), DType::F32, buf.data(), dtype, values.size());
  add_raw(name, safetensors_dtype(dtype), shape, buf);
}

void SafetensorsWriter::add_raw(const std::string& name, const std::string& dtype, const std::vector<uint64_t>& shape,
                                const std::string& bytes) {
  uint64_t begin = data_.size();
  data_ += bytes;
  entries_.push_back({name, dtype, shape, begin, data_.size()});
}

std::string SafetensorsWriter::header_json() const {
  // ordered_json keeps the tensors in the order they were added.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  for (const auto& e : entries_)
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  return h.dump();
}

std::string SafetensorsWriter::bytes() const {
  std::string header = header_json();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data_;
}

void SafetensorsWriter::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  std::string b = bytes();
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!f) throw InputError(path + ": cannot write safetensors file");
}

}  // namespace gptvk
