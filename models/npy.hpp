// NumPy .npy files (format version 1.0), little-endian float32, C order: what
// `gpt-vk forward` writes and what the PyTorch fixtures store.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gptvk {

struct NpyArray {
  std::vector<uint64_t> shape;
  std::vector<float> data;
};

// Writes a float32 array atomically (engine/files.hpp: the old file survives a failure);
// throws InputError "cannot write PATH: reason".
void write_npy(const std::string& path, const std::vector<uint64_t>& shape, const float* data);
// Reads a little-endian float32 C-order array; throws InputError on anything else.
NpyArray read_npy(const std::string& path);

}  // namespace gptvk
