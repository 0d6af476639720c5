#include "models/torch_source.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/torch_pickle.hpp"
#include "models/zip_archive.hpp"

namespace gptvk {

namespace {

// The archive's "<name>/data.pkl" with no other '/' (torch names the folder after the file,
// or "archive"); "" when it has none. Two are refused, as torch.load refuses entries outside
// the first one's folder: which model would load is anyone's guess.
std::string pickle_entry(const ZipArchive& z) {
  std::string found;
  for (const auto& [name, bytes] : z.entries()) {
    if (!(name.size() > 9 && name.ends_with("/data.pkl") && name.find('/') == name.size() - 9)) continue;
    if (!found.empty())
      throw InputError(z.path() + ": holds two torch.save archives (" + found + " and " + name + "): one model a file");
    found = name;
  }
  return found;
}

class TorchSource : public MappedTensorSource {
 public:
  // A torch.save zip: storages are its entries <name>/data/<key>.
  explicit TorchSource(ZipArchive z) : path_(z.path()), bytes_(z.bytes()), zip_(std::move(z)) {
    const std::string pkl = pickle_entry(*zip_);
    if (pkl.empty()) throw InputError(path_ + ": a zip archive without <name>/data.pkl: not a torch.save file");
    const std::string prefix = pkl.substr(0, pkl.size() - 8);  // "<name>/"
    std::span<const std::byte> order;
    if (zip_->find(prefix + "byteorder", order) &&
        std::string(reinterpret_cast<const char*>(order.data()), order.size()) != "little")
      throw InputError(path_ + ": a big-endian torch.save file is not supported");
    std::span<const std::byte> pickle;
    zip_->find(pkl, pickle);
    zip_->check_crc(pkl);
    for (auto& [name, ref] : read_state_dict_pickle(path_, pickle)) {
      const std::string entry = prefix + "data/" + ref.storage_key;
      std::span<const std::byte> storage;
      if (!zip_->find(entry, storage))
        throw InputError(path_ + ": tensor '" + name + "': its storage data/" + ref.storage_key +
                         " is not in the archive");
      add(name, ref, storage);
      storage_of_[name] = entry;
      checked_.try_emplace(entry);
    }
  }
  // A legacy torch.save file: storages follow the pickles (torch_pickle.hpp).
  TorchSource(std::string path, files::MappedFile file)
      : path_(std::move(path)), bytes_(file.bytes), mapping_(std::move(file.keep)) {
    LegacyTorchFile legacy = read_legacy_torch(path_, bytes_);
    for (auto& [name, ref] : legacy.tensors) {
      auto storage = legacy.storages.find(ref.storage_key);
      if (storage == legacy.storages.end())
        throw InputError(path_ + ": tensor '" + name + "': its storage " + ref.storage_key +
                         " is not in the file's list of storages");
      add(name, ref, storage->second);
    }
  }
  const std::string& path() const override { return path_; }
  const TensorInfo& get(std::string_view name) const override {
    const TensorInfo* t = find(name);
    if (t && why_.count(t->name)) throw InputError(path() + ": tensor '" + t->name + "' " + why_.at(t->name));
    return TensorSource::get(name);
  }
  // A storage's bytes are checked against their CRC-32 when a tensor of it is first read
  // (here, not at open: reading a model's gigabytes twice would double the load).
  // (The legacy format has no checksums.)
  std::span<const std::byte> data(const TensorInfo& t) const override {
    if (zip_) {
      const std::string& entry = storage_of_.at(t.name);
      std::call_once(checked_.at(entry), [&] { zip_->check_crc(entry); });
    }
    auto strided = strided_.find(t.name);
    if (strided == strided_.end()) return bytes_.subspan(t.begin, t.end - t.begin);
    gather(strided->second, t.end - t.begin);
    return scratch_;
  }
  void release(const TensorInfo&) const override { std::vector<std::byte>().swap(scratch_); }

 private:
  // The tensor `r` of the storage whose elements are `storage` (inside the mapping).
  void add(const std::string& name, const TorchTensorRef& r, std::span<const std::byte> storage) {
    auto bad = [&](const std::string& what) { throw InputError(path() + ": tensor '" + excerpt(name) + "': " + what); };
    if (r.storage_numel > storage.size() / r.element_bytes)
      bad("storage " + r.storage_key + " holds " + std::to_string(storage.size()) + " bytes, too few for its " +
          std::to_string(r.storage_numel) + " elements of " + std::to_string(r.element_bytes) + " bytes: truncated");
    TensorInfo t;
    t.name = name;
    t.dtype_name = r.dtype;
    t.shape = r.size;
    uint64_t n = 1, last = 0;  // elements; the storage index of the last one, less the offset
    bool contiguous = true;
    for (size_t d = r.size.size(); d-- > 0;) {
      if (r.size[d] != 1 && r.stride[d] != n) contiguous = false;
      if (__builtin_mul_overflow(n, r.size[d], &n)) bad("its size overflows");
      uint64_t reach = 0;
      if (r.size[d] && (__builtin_mul_overflow(r.size[d] - 1, r.stride[d], &reach) ||
                        __builtin_add_overflow(last, reach, &last)))
        bad("its strides overflow");
    }
    // Checked for empty tensors too: their offset still places them in the file.
    const uint64_t span = n ? (contiguous ? n : last + 1) : 0;
    if (r.offset > r.storage_numel || span > r.storage_numel - r.offset)
      bad("elements [" + std::to_string(r.offset) + ", +" + std::to_string(span) + ") run past its storage of " +
          std::to_string(r.storage_numel));
    t.begin = uint64_t(storage.data() - bytes_.data()) + r.offset * r.element_bytes;
    t.end = t.begin + n * r.element_bytes;  // what data() hands out
    // A view saved as it was (a transposed weight without .contiguous()): torch.load reads it,
    // so data() gathers its elements in row-major order. One that repeats elements (an
    // expanded view, stride 0) could ask for far more memory than the file holds.
    const bool repeats = !contiguous && n > span;
    t.supported = !repeats && (r.dtype == "F32" || r.dtype == "F16" || r.dtype == "BF16");
    t.dtype = r.dtype == "F16" ? DType::F16 : r.dtype == "BF16" ? DType::BF16 : DType::F32;
    if (repeats) why_[name] = "is a view that repeats its storage's elements (save tensor.contiguous() instead)";
    else if (!contiguous && n) strided_[name] = Strided{t.begin, r.element_bytes, r.size, r.stride};
    if (!infos_.emplace(name, std::move(t)).second) bad("appears twice in the state dict");
  }

  struct Strided {
    uint64_t begin, element_bytes;  // the file offset of element 0
    std::vector<uint64_t> size, stride;
  };
  // The view's elements in row-major order into scratch_ (`bytes` of them).
  void gather(const Strided& v, uint64_t bytes) const {
    scratch_.resize(bytes);
    const std::byte* base = bytes_.data() + v.begin;
    const size_t rank = v.size.size();
    std::vector<uint64_t> index(rank, 0);
    uint64_t from = 0;  // elements into the storage, past the offset
    for (uint64_t out = 0; out < bytes; out += v.element_bytes) {
      std::memcpy(scratch_.data() + out, base + from * v.element_bytes, v.element_bytes);
      for (size_t d = rank; d-- > 0;) {  // the next index, the last dimension fastest
        from += v.stride[d];
        if (++index[d] < v.size[d]) break;
        from -= v.stride[d] * index[d];
        index[d] = 0;
      }
    }
  }

  std::string path_;
  std::span<const std::byte> bytes_;  // the whole file
  std::optional<ZipArchive> zip_;     // a zip's entries, or none (the legacy format)
  std::shared_ptr<const void> mapping_;  // the legacy format's file
  std::map<std::string, Strided> strided_;  // tensors saved as non-contiguous views
  std::map<std::string, std::string> why_;  // why a tensor of a loadable dtype cannot load
  mutable std::vector<std::byte> scratch_;   // the last gathered view
  std::map<std::string, std::string> storage_of_;    // a zip's tensor name -> its storage entry
  mutable std::map<std::string, std::once_flag> checked_;  // a zip's storage entry -> its CRC checked
};

}  // namespace

std::unique_ptr<TensorSource> open_torch_source(const std::string& path) {
  return std::make_unique<TorchSource>(ZipArchive::open(path));
}

std::unique_ptr<TensorSource> open_legacy_torch_source(const std::string& path) {
  return std::make_unique<TorchSource>(path, files::map_regular(path));
}

}  // namespace gptvk
