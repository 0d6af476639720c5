// Where a model's tensors come from, whatever the file format: a safetensors file, a GGUF
// file, a torch.save file (zip or legacy) or a sharded Hugging Face snapshot. WeightsFile reads every format
// through this one interface: named tensors with a shape in row-major order (slowest
// dimension first, as numpy and PyTorch write it) and their values as F32, F16 or BF16.
// Formats that store something else (GGUF's quantized blocks) convert one tensor at a
// time in data(), so the host never holds more than one converted tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/safetensors.hpp"

namespace gptvk {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // The file (or folder) the tensors come from, for error messages.
  virtual const std::string& path() const = 0;
  // Null when absent; a tensor of a type nothing can load is listed but not `supported`.
  virtual const TensorInfo* find(std::string_view name) const = 0;
  // Every tensor's name (for messages and tests).
  virtual std::vector<std::string> names() const = 0;
  // The tensor's values in t.dtype, exactly t.elements() of them; valid until the next
  // data() or release() call.
  virtual std::span<const std::byte> data(const TensorInfo& t) const = 0;
  // The caller is done with the tensor's values.
  virtual void release(const TensorInfo&) const {}

  // The tensor's data as ggml blocks of `want` (Q8_0 or Q4_0) when the file stores it so
  // (a GGUF tensor: loaded without dequantizing), else empty.
  virtual std::span<const std::byte> ggml_blocks(const TensorInfo&, DType /*want*/) const { return {}; }

  // The types this source converts in data() and the storage each goes to ("its Q4_K and
  // Q6_K tensors to f16"), to say so once; "" if none. `table` is the storage of the token
  // embedding and LM head, `target` the other matrices'.
  virtual std::string conversion_note(DType /*target*/, DType /*table*/) const { return ""; }

  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // The tensor, or an InputError naming it when it is absent or of an unloadable type.
  virtual const TensorInfo& get(std::string_view name) const;
};

// A source whose tensors are listed in a name -> TensorInfo map filled at opening (GGUF,
// torch.save): find() and names() read the map.
class MappedTensorSource : public TensorSource {
 public:
  const TensorInfo* find(std::string_view name) const override {
    auto it = infos_.find(name);
    return it == infos_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& [k, v] : infos_) n.push_back(k);
    return n;
  }

 protected:
  std::map<std::string, TensorInfo, std::less<>> infos_;
};

// What the first bytes of a file say it is.
enum class FileFormat { Safetensors, Gguf, TorchZip /* any zip */, TorchLegacy, Unknown };
FileFormat sniff_format(const std::string& path);
// "starts with bytes 50 4b 03 04 ... (a zip archive)" and similar, for an unknown format.
std::string describe_file_start(const std::string& path);

// Opens `path` as whichever format its content says (a folder: a sharded or single-file
// Hugging Face snapshot). InputError naming the file for anything else.
std::unique_ptr<TensorSource> open_tensor_source(const std::string& path);

// A safetensors file as a TensorSource (owning it).
std::unique_ptr<TensorSource> safetensors_source(SafetensorsFile file);
// Several sources read as one (a sharded snapshot); a name in two of them is an error.
std::unique_ptr<TensorSource> joined_source(std::string path, std::vector<std::unique_ptr<TensorSource>> parts);

}  // namespace gptvk
