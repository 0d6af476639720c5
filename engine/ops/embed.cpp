#include "engine/ops/embed.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/ops/attention.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {
// The per-row factors of an f16 table (engine/f16_rows.hpp); other dtypes have none and
// bind their first chunk, which the shader then never reads.
View row_scales(const Matrix& m) { return whole(m.dtype == DType::F16 ? m.row_scales : m.chunks.front()); }
// The shader's row stride: elements, or uint words for a quantized table.
uint32_t row_stride(const Matrix& m) {
  return is_quantized(m.dtype) ? static_cast<uint32_t>(m.row_bytes() / 4) : m.row_stride;
}

// Either variant: `positions` is the step buffer (variant "step") or the row table ("rows").
void embed_with(Graph& g, const std::string& variant, View ids, View positions, uint64_t positions_bytes,
                const Matrix& tok_emb, const Matrix& pos_emb, View x, uint32_t T, const std::string& name,
                uint32_t x_row0) {
  const uint32_t C = tok_emb.cols;
  if (pos_emb.cols != C)
    throw std::logic_error(name + ": position table is " + std::to_string(pos_emb.cols) + " wide, token table " +
                           std::to_string(C));
  if (tok_emb.chunks.empty() || pos_emb.chunks.empty()) throw std::logic_error(name + ": empty embedding table");
  if (ids.size() < uint64_t(T) * 4) throw std::logic_error(name + ": ids hold fewer than T ids");
  if (positions.size() < positions_bytes)
    throw std::logic_error(name + (variant == "rows" ? ": row table holds fewer than T rows" : ": step buffer is too small"));
  if (x.size() < (uint64_t(x_row0) + T) * C * 4)
    throw std::logic_error(name + ": x holds fewer than x_row0 + T rows of C floats");
  if (T == 0) return;

  constexpr uint32_t local = 64;
  const auto& p = g.context().pipelines().get(
      {"embed." + variant,
       {local, C, static_cast<uint32_t>(tok_emb.dtype), row_stride(tok_emb), tok_emb.rows,
        static_cast<uint32_t>(pos_emb.dtype), row_stride(pos_emb), pos_emb.rows},
       7, 6 * 4});
  const std::array<uint32_t, 3> groups{(C + local - 1) / local, std::min<uint32_t>(T, 65535), 1};
  // Each dispatch writes the rows of x whose token and position its chunks hold; they all
  // declare a write of x, so the graph orders them (the rows are disjoint, the order is not
  // needed for correctness, but the graph cannot know that).
  for (size_t tc = 0; tc < tok_emb.chunks.size(); ++tc)
    for (size_t pc = 0; pc < pos_emb.chunks.size(); ++pc) {
      std::vector<uint32_t> push{T, static_cast<uint32_t>(tc) * tok_emb.rows_per_chunk, tok_emb.chunk_rows(tc),
                                 static_cast<uint32_t>(pc) * pos_emb.rows_per_chunk, pos_emb.chunk_rows(pc), x_row0};
      g.add({name, &p,
             {{ids, Access::Read},
              {positions, Access::Read},
              {whole(tok_emb.chunks[tc]), Access::Read},
              {whole(pos_emb.chunks[pc]), Access::Read},
              {x, Access::Write},
              {row_scales(tok_emb), Access::Read},
              {row_scales(pos_emb), Access::Read}},
             groups, std::move(push)});
    }
}
}  // namespace

void embed(Graph& g, View ids, View step, const Matrix& tok_emb, const Matrix& pos_emb, View x, uint32_t T,
           const std::string& name, uint32_t x_row0) {
  embed_with(g, "step", ids, step, sizeof(StepState), tok_emb, pos_emb, x, T, name, x_row0);
}

void embed_rows(Graph& g, View ids, View rows, const Matrix& tok_emb, const Matrix& pos_emb, View x, uint32_t T,
                const std::string& name) {
  embed_with(g, "rows", ids, rows, uint64_t(T) * sizeof(RowEntry), tok_emb, pos_emb, x, T, name, 0);
}

}  // namespace gptvk::ops
