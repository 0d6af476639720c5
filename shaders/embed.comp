#version 450
#extension GL_GOOGLE_include_directive : require
// Token + position embedding: x[t][c] = tok[ids[t]][c] + pos[step_pos + t][c].
// The tables are row chunks of Matrix objects (engine/tensor.hpp) read as uint words: f32
// values are the words' bits, f16/bf16 values are packed two per word (element c in the
// low half when c is even), so no 16-bit storage feature is needed. A dispatch binds one
// token chunk and one position chunk and writes only the rows whose token and position
// fall in those chunks; the op issues one dispatch per chunk pair, so across them every
// row is written exactly once.
// ROWS: the rows of several sequences' steps at once (a batched decode step, a burst of
// prompts): binding 1 is their table of ops::RowEntry (engine/ops/attention.hpp), row t at
// position pos0 + in_step of its own sequence, in place of the step buffer's step_pos + t.

//! variant step
//! variant rows ROWS=1
#ifndef ROWS
#define ROWS 0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint C = 1;           // embedding width
layout(constant_id = 2) const uint TOK_DT = 0;      // engine/dtype.hpp DType
layout(constant_id = 3) const uint TOK_STRIDE = 8;  // elements per stored token row (q8_0/q4_0: uint words)
layout(constant_id = 4) const uint VOCAB = 1;       // token rows over all chunks
layout(constant_id = 5) const uint POS_DT = 0;
layout(constant_id = 6) const uint POS_STRIDE = 8;
layout(constant_id = 7) const uint POS_ROWS = 1;    // position rows over all chunks

#if ROWS
layout(std430, binding = 1) readonly buffer Rows { uvec4 row_table[]; };  // {pos0, slot, in_step, skip}
#else
#define STEP_BINDING 1
#include "common/step.glsl"
#endif

layout(push_constant) uniform Push {
  uint T;         // tokens in this step
  uint tok_row0;  // first token row held by the bound token chunk
  uint tok_rows;  // rows in that chunk
  uint pos_row0;
  uint pos_rows;
  uint x_row0;    // row of x that token 0 goes to (a batched step's row b: its offset would
                  // not meet the device's binding alignment where emb_dim % 4 != 0)
} pc;

layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 3) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 4) writeonly buffer X { float x[]; };
// f16 tables: each row's factor that undoes its storage scaling (engine/f16_rows.hpp).
layout(std430, binding = 5) readonly buffer TokScale { float tok_scale[]; };
layout(std430, binding = 6) readonly buffer PosScale { float pos_scale[]; };

// Element `i` (flat index into a row-major table) of a table stored in dtype `dt`, given
// the word that holds it.
uint word_index(uint dt, uint i) { return dt == 0u ? i : i >> 1; }
float unpack(uint dt, uint word, uint i) {
  if (dt == 0u) return uintBitsToFloat(word);
  uint bits = (i & 1u) != 0u ? word >> 16 : word & 0xffffu;
  if (dt == 1u) return unpackHalf2x16(bits).x;
  return uintBitsToFloat(bits << 16);  // bf16: the high half of an f32
}

// Element c of the Q8_0 (dt 3) or Q4_0 (dt 4) row starting at uint word `base` of a table
// read through `word(i)` (engine/quant.hpp: the row's f16 block scales in whole 16-byte
// words, then its blocks).
#define QUANT_VALUE(word, dt, base, c, out)                                                   \
  {                                                                                           \
    uint qb = (c) / 32u, data = (base) + ((C / 32u + 7u) / 8u) * 4u;                         \
    uint sw = word((base) + qb / 2u);                                                         \
    float d = unpackHalf2x16((qb & 1u) != 0u ? sw >> 16 : sw).x;                              \
    if ((dt) == 3u) {                                                                         \
      uint byte_i = (c);                                                                      \
      out = float(int(word(data + byte_i / 4u) << (24u - 8u * (byte_i & 3u))) >> 24) * d;    \
    } else {                                                                                  \
      uint j = (c) % 32u, byte_i = qb * 16u + (j & 15u);                                      \
      uint nib = (word(data + byte_i / 4u) >> (8u * (byte_i & 3u) + (j >= 16u ? 4u : 0u))) & 15u; \
      out = float(int(nib) - 8) * d;                                                          \
    }                                                                                         \
  }
#define TOK_WORD(i) tok[i]
#define POS_WORD(i) pos[i]

void main() {
  uint c = gl_GlobalInvocationID.x;
  if (c >= C) return;
  for (uint t = gl_WorkGroupID.y; t < pc.T; t += gl_NumWorkGroups.y) {
    // Clamped so that a bad id or position can never read outside the tables (the host
    // validates ids; this is defense in depth).
    uint id = min(ids[t], VOCAB - 1u);
#if ROWS
    uint p = min(row_table[t].x + row_table[t].z, POS_ROWS - 1u);
#else
    uint p = min(step_pos + t, POS_ROWS - 1u);
#endif
    if (id - pc.tok_row0 >= pc.tok_rows || p - pc.pos_row0 >= pc.pos_rows) continue;  // another chunk's row
    uint ti = (id - pc.tok_row0) * TOK_STRIDE + c;
    uint pi = (p - pc.pos_row0) * POS_STRIDE + c;
    float tv, pv;
    if (TOK_DT >= 3u) QUANT_VALUE(TOK_WORD, TOK_DT, (id - pc.tok_row0) * TOK_STRIDE, c, tv)
    else tv = unpack(TOK_DT, tok[word_index(TOK_DT, ti)], ti);
    if (POS_DT >= 3u) QUANT_VALUE(POS_WORD, POS_DT, (p - pc.pos_row0) * POS_STRIDE, c, pv)
    else pv = unpack(POS_DT, pos[word_index(POS_DT, pi)], pi);
    if (TOK_DT == 1u) tv *= tok_scale[id];
    if (POS_DT == 1u) pv *= pos_scale[p];
    x[(pc.x_row0 + t) * C + c] = tv + pv;
  }
}
