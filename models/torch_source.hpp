// A torch.save zip (PyTorch >= 1.6: <name>/data.pkl, <name>/data/<key> storages) of a
// state dict as a TensorSource: the pickle read by the restricted unpickler
// (torch_pickle.hpp), each tensor a contiguous byte range of its stored storage entry.
#pragma once
#include <memory>
#include <string>

#include "models/weights_source.hpp"

namespace gptvk {

std::unique_ptr<TensorSource> open_torch_source(const std::string& path);

}  // namespace gptvk
