// Token + position embedding gather (shaders/embed.comp): the first op of a forward pass.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/tensor.hpp"

namespace gptvk::ops {

// x[t][c] = tok_emb[ids[t]][c] + pos_emb[pos0 + t][c] for t < T, c < C = tok_emb.cols, where
// pos0 is StepState::pos in the step buffer (engine/ops/step.hpp), read on the device so a
// recorded graph follows the position as it advances. ids holds T uint32 token ids; x is
// T x C floats. The tables may be f32, f16 or bf16 and split into chunks: one dispatch per
// (token chunk, position chunk) pair. Ids >= tok_emb.rows and positions >= pos_emb.rows are
// clamped to the last row (the host must reject them; the clamp only keeps reads in bounds).
// x_row0: token t goes to row x_row0 + t of x, for a row whose byte offset would not meet
// the device's storage-buffer offset alignment as a view's offset (C % 4 != 0).
void embed(Graph& g, View ids, View step, const Matrix& tok_emb, const Matrix& pos_emb, View x, uint32_t T,
           const std::string& name = "embed", uint32_t x_row0 = 0);

// The same for the rows of several sequences' steps in one dispatch (a batched decode step,
// a burst of prompts): row t embeds ids[t] at position pos0 + in_step of rows[t], an
// ops::RowEntry (engine/ops/attention.hpp; the attention's table of the same rows), into
// row t of x.
void embed_rows(Graph& g, View ids, View rows, const Matrix& tok_emb, const Matrix& pos_emb, View x, uint32_t T,
                const std::string& name = "embed");

}  // namespace gptvk::ops
