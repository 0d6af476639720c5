// A torch.save file of a state dict as a TensorSource: a zip (PyTorch >= 1.6: <name>/data.pkl,
// <name>/data/<key> storages) or the legacy format (pickles, then the storages), the pickles
// read by the restricted unpickler (torch_pickle.hpp), each tensor a byte range of its
// storage in the mapped file.
#pragma once
#include <memory>
#include <string>

#include "models/weights_source.hpp"

namespace gptvk {

std::unique_ptr<TensorSource> open_torch_source(const std::string& path);
std::unique_ptr<TensorSource> open_legacy_torch_source(const std::string& path);

}  // namespace gptvk
