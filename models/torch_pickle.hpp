// A restricted unpickler for the data.pkl of a torch.save zip: it understands the opcodes
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

}  // namespace gptvk
