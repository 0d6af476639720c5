// Copies a block of rows between float matrices of the same width.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"

namespace gptvk::ops {

// dst[dst_row + r][:] = src[src_row + r][:] for r < rows, each row `cols` floats.
void copy_rows(Graph& g, View src, View dst, uint32_t src_row, uint32_t rows, uint32_t cols,
               const std::string& name = "copy_rows", uint32_t dst_row = 0);

}  // namespace gptvk::ops
