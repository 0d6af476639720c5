// A restricted unpickler for torch.save files (the data.pkl of a zip, or the pickles of the
// legacy format one after another): it understands the opcodes
// a state dict of tensors is pickled with and builds nothing but dicts, tuples, lists,
// strings, numbers and tensor descriptions. The only globals it accepts are
// collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and
// torch's storage classes; any other (os.system, builtins.eval, ...) is refused with an
// InputError naming it. Nothing from the file is ever called or executed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <map>
#include <utility>
#include <vector>

namespace gptvk {

struct TorchTensorRef {
  std::string storage_key;   // archive/data/<key>
  std::string dtype;         // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  uint64_t element_bytes = 0;
  uint64_t storage_numel = 0;
  uint64_t offset = 0;       // elements into the storage
  std::vector<uint64_t> size, stride;
};

// The tensors of the state dict pickled in `pickle`, in the file's order. `path` names
// the file in errors.
std::vector<std::pair<std::string, TorchTensorRef>> read_state_dict_pickle(const std::string& path,
                                                                           std::span<const std::byte> pickle);

// A legacy torch.save file (PyTorch before 1.6, or _use_new_zipfile_serialization=False):
// five pickles one after another (a magic number, the protocol version 1001, the writer's
// byte order and type sizes, the object with its storages named by key, the list of those
// keys), then each listed storage as its element count (int64) and its elements.
struct LegacyTorchFile {
  std::vector<std::pair<std::string, TorchTensorRef>> tensors;  // the state dict's
  std::map<std::string, std::span<const std::byte>> storages;    // key -> its elements in `file`
};

// Whether `start` (a file's first bytes) opens with the legacy format's magic-number pickle.
bool is_legacy_torch(std::span<const std::byte> start);
// The state dict and storages of a legacy torch.save file held in `file`; `path` names it
// in errors.
LegacyTorchFile read_legacy_torch(const std::string& path, std::span<const std::byte> file);

}  // namespace gptvk
