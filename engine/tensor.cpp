#include "engine/tensor.hpp"

#include "engine/parallel.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

Matrix Matrix::create(vk::Context& ctx, DType dtype, uint32_t rows, uint32_t cols, const std::string& what,
                      uint64_t max_chunk_bytes) {
  Matrix m;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  m.row_stride = (cols + kRowAlign - 1) / kRowAlign * kRowAlign;
  uint64_t limit = max_chunk_bytes ? max_chunk_bytes : ctx.caps().max_binding_bytes();
  uint64_t fit = limit / m.row_bytes();
  if (fit >= rows) {
    m.rows_per_chunk = rows;
  } else {
    m.rows_per_chunk = static_cast<uint32_t>(fit / kChunkRowAlign * kChunkRowAlign);
    if (m.rows_per_chunk == 0)
      throw DeviceError(what + ": a block of " + std::to_string(kChunkRowAlign) + " rows (" +
                        std::to_string(kChunkRowAlign * m.row_bytes()) +
                        " bytes) exceeds the device's largest binding of " + std::to_string(limit) + " bytes");
  }
  uint32_t n_chunks = rows == 0 ? 0 : (rows + m.rows_per_chunk - 1) / m.rows_per_chunk;
  for (uint32_t c = 0; c < n_chunks; ++c) {
    std::string name = n_chunks > 1 ? what + " (part " + std::to_string(c + 1) + ")" : what;
    m.chunks.emplace_back(ctx, uint64_t(m.chunk_rows(c)) * m.row_bytes(), vk::Memory::Device, name);
    if (m.row_stride != cols) m.chunks.back().fill_zero();
  }
  // Texel views (uvec4 per texel; rows are whole texels) where every chunk fits one, for
  // the mat-vec that reads W through texel fetches (vectorised on lavapipe).
  const auto& caps = ctx.caps();
  bool views = caps.texel_uvec4 && !m.chunks.empty();
  for (const auto& c : m.chunks) views = views && c.size() / 16 <= caps.max_texel_buffer_elements;
  if (views)
    for (auto& c : m.chunks) c.create_texel_view();
  return m;
}

uint32_t Matrix::chunk_rows(size_t chunk) const {
  uint32_t start = static_cast<uint32_t>(chunk) * rows_per_chunk;
  return std::min(rows_per_chunk, rows - start);
}

uint64_t Matrix::bytes() const {
  uint64_t b = 0;
  for (const auto& c : chunks) b += c.size();
  return b;
}

void Matrix::write_rows(uint32_t row0, uint32_t n, const void* src, DType from) {
  if (row0 + n > rows) throw std::logic_error("Matrix::write_rows past the last row");
  const auto* in = static_cast<const char*>(src);
  const uint64_t src_row = uint64_t(cols) * dtype_bytes(from);
  std::vector<char> staged;
  uint32_t r = row0;
  while (r < row0 + n) {
    uint32_t c = r / rows_per_chunk;
    uint32_t local = r - c * rows_per_chunk;
    uint32_t take = std::min(row0 + n - r, chunk_rows(c) - local);
    // Straight into mapped memory where there is some (the padding columns stay as create()
    // zeroed them), else through a host copy and an upload.
    char* mapped = static_cast<char*>(chunks[c].mapped());
    char* out = mapped ? mapped + uint64_t(local) * row_bytes() : nullptr;
    if (!mapped) {
      staged.assign(uint64_t(take) * row_bytes(), 0);
      out = staged.data();
    }
    const char* first = in + uint64_t(r - row0) * src_row;
    parallel_for(take, std::max<size_t>(1, (1u << 18) / std::max(1u, cols)), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) convert(first + i * src_row, from, out + i * row_bytes(), dtype, cols);
    });
    if (!mapped) chunks[c].upload(staged.data(), staged.size(), uint64_t(local) * row_bytes());
    r += take;
  }
}

std::vector<float> Matrix::read_rows_f32(uint32_t row0, uint32_t n) const {
  std::vector<float> out(uint64_t(n) * cols);
  std::vector<char> raw(row_bytes());
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t r = row0 + i;
    uint32_t c = r / rows_per_chunk;
    chunks[c].download(raw.data(), row_bytes(), uint64_t(r - c * rows_per_chunk) * row_bytes());
    convert(raw.data(), dtype, out.data() + uint64_t(i) * cols, DType::F32, cols);
  }
  return out;
}

}  // namespace gptvk
