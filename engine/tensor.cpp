#include "engine/tensor.hpp"

#include "engine/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/f16_rows.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

Matrix Matrix::create(vk::Context& ctx, DType dtype, uint32_t rows, uint32_t cols, const std::string& what,
                      uint64_t max_chunk_bytes) {
  Matrix m;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  if (is_quantized(dtype) && cols % kQuantBlock != 0)
    throw InputError(what + ": " + dtype_name(dtype) + " storage needs a multiple of " + std::to_string(kQuantBlock) +
                     " columns, not " + std::to_string(cols));
  m.row_stride = is_quantized(dtype) ? cols : (cols + kRowAlign - 1) / kRowAlign * kRowAlign;
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
  if (dtype == DType::F16 && rows > 0) {
    m.row_scale.assign(rows, 1.0f);
    m.row_scales = vk::Buffer(ctx, uint64_t(rows) * 4, vk::Memory::Device, what + " (row scales)");
    m.row_scales.upload(m.row_scale.data(), uint64_t(rows) * 4);
  }
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

namespace {

// Whether any of `n` bf16 rows of m at `rows` holds a value f16 cannot (Matrix::outside_f16):
// magnitudes from 0x4780 (65536) up, which includes infinities and NaNs.
bool bf16_rows_outside_f16(const char* rows, uint32_t n, const Matrix& m) {
  bool outside = false;
  for (uint32_t i = 0; i < n; ++i) {
    const auto* row = reinterpret_cast<const uint16_t*>(rows + uint64_t(i) * m.row_bytes());
    for (uint32_t j = 0; j < m.cols; ++j) outside |= (row[j] & 0x7fffu) >= 0x4780u;
  }
  return outside;
}

// The same for Q8_0 / Q4_0 rows, whose weights the matrix units turn into f16 as q x d:
// a block whose scale times the largest |q| (128 for Q8_0, which llama.cpp's files may
// hold, 8 for Q4_0) passes 65504.
bool quant_rows_outside_f16(const char* rows, uint32_t n, const Matrix& m) {
  const float most_q = m.dtype == DType::Q8_0 ? 128.0f : 8.0f;
  bool outside = false;
  for (uint32_t i = 0; i < n; ++i) {
    const auto* scales = reinterpret_cast<const uint16_t*>(rows + uint64_t(i) * m.row_bytes());
    for (uint32_t b = 0; b < m.cols / kQuantBlock; ++b) outside |= std::fabs(f16_to_f32(scales[b])) * most_q > 65504.0f;
  }
  return outside;
}

// Calls fill(first, count, out) for disjoint runs of rows [0, n) of `m` starting at row0,
// in parallel over the cores, where `out` points at row row0 + first in m's dtype and rows
// are m.row_bytes() apart: straight into mapped device memory where there is some (the
// padding columns stay as create() zeroed them), else into a host copy that is uploaded.
// f16 rows are then scaled in place (engine/f16_rows.hpp) and their scales uploaded.
template <class Fill>
void fill_rows(Matrix& m, uint32_t row0, uint32_t n, uint32_t rows_per_task, Fill fill) {
  if (row0 + n > m.rows) throw std::logic_error("Matrix: write past the last row");
  std::vector<char> staged;
  uint32_t r = row0;
  while (r < row0 + n) {
    const uint32_t c = r / m.rows_per_chunk;
    const uint32_t local = r - c * m.rows_per_chunk;
    const uint32_t take = std::min(row0 + n - r, m.chunk_rows(c) - local);
    char* mapped = static_cast<char*>(m.chunks[c].mapped());
    char* out = mapped ? mapped + uint64_t(local) * m.row_bytes() : nullptr;
    if (!mapped) {
      staged.assign(uint64_t(take) * m.row_bytes(), 0);
      out = staged.data();
    }
    const uint32_t first = r - row0, tasks = (take + rows_per_task - 1) / rows_per_task;
    parallel_for(tasks, 1, [&](size_t b, size_t e) {
      const uint32_t lo = static_cast<uint32_t>(b) * rows_per_task;
      const uint32_t hi = std::min(take, static_cast<uint32_t>(e) * rows_per_task);
      fill(first + lo, hi - lo, out + uint64_t(lo) * m.row_bytes());
      const char* filled = out + uint64_t(lo) * m.row_bytes();
      if ((m.dtype == DType::BF16 && bf16_rows_outside_f16(filled, hi - lo, m)) ||
          (is_quantized(m.dtype) && quant_rows_outside_f16(filled, hi - lo, m)))
        std::atomic_ref<bool>(m.outside_f16).store(true, std::memory_order_relaxed);
      if (m.dtype == DType::F16)
        for (uint32_t i = lo; i < hi; ++i) {
          auto* row = reinterpret_cast<uint16_t*>(out + uint64_t(i) * m.row_bytes());
          const int shift = f16_row_shift(row, m.cols);
          f16_scale_row(row, m.cols, shift);
          m.row_scale[row0 + first + i] = 1.0f / float(1u << shift);
        }
    });
    if (!mapped) m.chunks[c].upload(staged.data(), staged.size(), uint64_t(local) * m.row_bytes());
    r += take;
  }
  if (m.dtype == DType::F16) m.row_scales.upload(m.row_scale.data() + row0, uint64_t(n) * 4, uint64_t(row0) * 4);
}

// Rows of a transposed source in tiles of kTileRows rows x kTileCols columns: each source
// row is read kTileRows values (256 bytes of f32) at a time, and a tile (<= 16 KiB) stays
// in L1 while it is converted out row by row.
constexpr uint32_t kTileRows = 64, kTileCols = 64;

template <class T>
void transpose_convert(const char* src, uint64_t stride, DType from, uint32_t first, uint32_t count, uint32_t cols,
                       char* out, uint64_t out_row_bytes, DType to) {
  alignas(64) T tile[kTileRows][kTileCols];
  const uint32_t out_esize = dtype_bytes(to);
  for (uint32_t j0 = 0; j0 < count; j0 += kTileRows) {
    const uint32_t nj = std::min(kTileRows, count - j0);
    for (uint32_t c0 = 0; c0 < cols; c0 += kTileCols) {
      const uint32_t nc = std::min(kTileCols, cols - c0);
      for (uint32_t c = 0; c < nc; ++c) {
        const char* line = src + ((c0 + c) * stride + first + j0) * sizeof(T);
        for (uint32_t j = 0; j < nj; ++j) std::memcpy(&tile[j][c], line + j * sizeof(T), sizeof(T));
      }
      for (uint32_t j = 0; j < nj; ++j)
        convert(tile[j], from, out + (j0 + j) * out_row_bytes + uint64_t(c0) * out_esize, to, nc);
    }
  }
}

// Quantized rows: each source row to f32 (unless it is), then into blocks.
void quantize_rows(const char* in, uint64_t src_row, DType from, uint32_t count, uint32_t cols, char* out,
                   uint64_t out_row, DType to) {
  std::vector<float> row(from == DType::F32 ? 0 : cols);
  for (uint32_t i = 0; i < count; ++i) {
    const char* src = in + i * src_row;
    if (from != DType::F32) convert(src, from, row.data(), DType::F32, cols);
    const float* values = from == DType::F32 ? reinterpret_cast<const float*>(src) : row.data();
    quantize_row(values, cols, to, reinterpret_cast<std::byte*>(out + i * out_row));
  }
}

}  // namespace

void Matrix::write_rows(uint32_t row0, uint32_t n, const void* src, DType from) {
  const auto* in = static_cast<const char*>(src);
  const uint64_t src_row = uint64_t(cols) * dtype_bytes(from), out_row = row_bytes();
  const uint32_t per_task = static_cast<uint32_t>(std::max<uint64_t>(1, (1u << 18) / std::max(1u, cols)));
  fill_rows(*this, row0, n, per_task, [&](uint32_t first, uint32_t count, char* out) {
    if (is_quantized(dtype))
      return quantize_rows(in + uint64_t(first) * src_row, src_row, from, count, cols, out, out_row, dtype);
    for (uint32_t i = 0; i < count; ++i)
      convert(in + uint64_t(first + i) * src_row, from, out + i * out_row, dtype, cols);
  });
}

void Matrix::write_rows_ggml(uint32_t row0, uint32_t n, const void* blocks) {
  if (!is_quantized(dtype)) throw std::logic_error("Matrix::write_rows_ggml: not a quantized matrix");
  const auto* in = static_cast<const std::byte*>(blocks);
  const uint64_t src_row = uint64_t(cols / kQuantBlock) * ggml_block_bytes(dtype), out_row = row_bytes();
  fill_rows(*this, row0, n, 256, [&](uint32_t first, uint32_t count, char* out) {
    for (uint32_t i = 0; i < count; ++i)
      repack_ggml_row(in + uint64_t(first + i) * src_row, cols, dtype, reinterpret_cast<std::byte*>(out + i * out_row));
  });
}

void Matrix::write_rows_transposed(uint32_t row0, uint32_t n, const void* src, uint64_t src_stride, DType from) {
  const auto* in = static_cast<const char*>(src);
  const uint64_t out_row = row_bytes();
  fill_rows(*this, row0, n, 4 * kTileRows, [&](uint32_t first, uint32_t count, char* out) {
    if (is_quantized(dtype)) {  // transposed to f32 rows first, then quantized
      std::vector<float> rows(uint64_t(count) * cols);
      char* staged = reinterpret_cast<char*>(rows.data());
      if (dtype_bytes(from) == 4)
        transpose_convert<uint32_t>(in, src_stride, from, first, count, cols, staged, uint64_t(cols) * 4, DType::F32);
      else
        transpose_convert<uint16_t>(in, src_stride, from, first, count, cols, staged, uint64_t(cols) * 4, DType::F32);
      return quantize_rows(staged, uint64_t(cols) * 4, DType::F32, count, cols, out, out_row, dtype);
    }
    if (dtype_bytes(from) == 4)
      transpose_convert<uint32_t>(in, src_stride, from, first, count, cols, out, out_row, dtype);
    else
      transpose_convert<uint16_t>(in, src_stride, from, first, count, cols, out, out_row, dtype);
  });
}

std::vector<float> Matrix::read_rows_f32(uint32_t row0, uint32_t n) const {
  std::vector<float> out(uint64_t(n) * cols);
  std::vector<char> raw(row_bytes());
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t r = row0 + i;
    uint32_t c = r / rows_per_chunk;
    chunks[c].download(raw.data(), row_bytes(), uint64_t(r - c * rows_per_chunk) * row_bytes());
    float* row = out.data() + uint64_t(i) * cols;
    if (is_quantized(dtype)) {
      dequantize_row(reinterpret_cast<const std::byte*>(raw.data()), cols, dtype, row);
      continue;
    }
    convert(raw.data(), dtype, row, DType::F32, cols);
    if (dtype == DType::F16)
      for (uint32_t j = 0; j < cols; ++j) row[j] *= row_scale[r];
  }
  return out;
}

}  // namespace gptvk
