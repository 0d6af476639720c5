#include <algorithm>
#include <set>

#include "tests/reference/elementwise.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/embed.hpp"
#include "engine/ops/step.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

namespace {

struct Shape {
  uint32_t vocab, C, context, T, pos0;
  bool chunked;  // split both tables into 64-row chunks
};

// Every shape runs for every storage dtype. The chunked ones split the token table into
// several chunks (ids below hit each) and the position table too (pos0 + T crosses 64).
const Shape kShapes[] = {
    {50, 1, 16, 3, 0, false},     {300, 7, 130, 70, 20, true},  {200, 96, 70, 65, 5, false},
    {130, 770, 100, 5, 62, true}, {257, 1600, 80, 10, 63, true},
};
const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};

// Random table values plus some f16 subnormals and exact zeros, which must survive, in
// rows of three magnitudes (f16 rows are stored scaled by a per-row power of two,
// engine/f16_rows.hpp, that the shader undoes exactly).
std::vector<float> table_values(uint32_t rows, uint32_t C, uint32_t seed) {
  auto v = test::random_floats(size_t(rows) * C, seed, -0.5f, 0.5f);
  for (size_t i = 0; i < v.size(); i += 13) v[i] = (i % 2 ? 3e-6f : -1e-7f);
  for (size_t i = 5; i < v.size(); i += 17) v[i] = 0.0f;
  const float row_scale[] = {1.0f, 3000.0f, 1e-3f};
  for (size_t i = 0; i < v.size(); ++i) v[i] *= row_scale[(i / C) % 3];
  return v;
}

// Ids covering the first and last row of every 64-row chunk, then random ones.
std::vector<uint32_t> make_ids(uint32_t T, uint32_t vocab, uint32_t seed) {
  std::vector<uint32_t> edge;
  for (uint32_t r = 0; r < vocab; r += 64) {
    edge.push_back(r);
    edge.push_back(std::min(r + 63, vocab - 1));
  }
  std::mt19937 rng(seed);
  std::vector<uint32_t> ids(T);
  for (uint32_t t = 0; t < T; ++t) ids[t] = t < edge.size() ? edge[t] : rng() % vocab;
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

struct Tables {
  Matrix tok, pos;
  std::vector<float> tok_f32, pos_f32;  // rounded to the storage dtype
};

Tables make_tables(vk::Context& ctx, const Shape& s, DType dt) {
  uint64_t chunk = s.chunked ? uint64_t(64) * ((s.C + 7) / 8 * 8) * dtype_bytes(dt) : 0;
  Tables t{Matrix::create(ctx, dt, s.vocab, s.C, "tok", chunk), Matrix::create(ctx, dt, s.context, s.C, "pos", chunk)};
  auto tok = table_values(s.vocab, s.C, 3 + s.C), pos = table_values(s.context, s.C, 4 + s.C);
  t.tok.write_rows(0, s.vocab, tok.data(), DType::F32);
  t.pos.write_rows(0, s.context, pos.data(), DType::F32);
  t.tok_f32 = test::rounded_to(tok, dt);
  t.pos_f32 = test::rounded_to(pos, dt);
  return t;
}

void set_pos(vk::Buffer& b, uint32_t pos0) {
  StepState st{pos0, 0, {0, 0}};
  b.upload(&st, sizeof(st));
}

vk::Buffer step_buffer(vk::Context& ctx, uint32_t pos0) {
  vk::Buffer b(ctx, sizeof(StepState), vk::Memory::Host, "step");
  set_pos(b, pos0);
  return b;
}

// The reference of rows that each sit at their own position: row t is ids[t] at positions[t].
std::vector<float> embedded_rows(const Tables& tables, uint32_t C, const std::vector<uint32_t>& ids,
                                 const std::vector<uint32_t>& positions) {
  std::vector<float> want;
  for (size_t t = 0; t < ids.size(); ++t) {
    auto row = cpu::embed(tables.tok_f32, tables.pos_f32, C, {ids[t]}, positions[t]);
    want.insert(want.end(), row.begin(), row.end());
  }
  return want;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(embed, test::NoValidationMessages)

// Exact: the gather copies stored values and adds them with one f32 add, as the reference.
BOOST_AUTO_TEST_CASE(matches_cpu_for_every_dtype_and_chunking) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& s : kShapes)
      for (DType dt : kDTypes) {
        auto tables = make_tables(*ctx, s, dt);
        if (s.chunked) BOOST_TEST_REQUIRE(tables.tok.chunks.size() >= 2u);
        auto ids = make_ids(s.T, s.vocab, s.C + s.T);
        std::set<uint32_t> chunks_hit;
        for (uint32_t id : ids) chunks_hit.insert(id / tables.tok.rows_per_chunk);
        BOOST_TEST_REQUIRE(chunks_hit.size() == tables.tok.chunks.size());
        auto dids = test::upload_bytes(*ctx, ids.data(), ids.size() * 4);
        auto step = step_buffer(*ctx, s.pos0);
        vk::Buffer x(*ctx, uint64_t(s.T) * s.C * 4);
        Graph g(*ctx);
        ops::embed(g, whole(dids), whole(step), tables.tok, tables.pos, whole(x), s.T);
        BOOST_TEST(g.size() == tables.tok.chunks.size() * tables.pos.chunks.size());
        g.record();
        g.run();
        auto want = cpu::embed(tables.tok_f32, tables.pos_f32, s.C, ids, s.pos0);
        BOOST_TEST(test::max_abs_error(test::download(x, want.size()), want) == 0.0,
                   label << " " << dtype_name(dt) << " vocab=" << s.vocab << " C=" << s.C << " T=" << s.T
                         << " pos0=" << s.pos0 << " chunks=" << tables.tok.chunks.size() << "x"
                         << tables.pos.chunks.size());
      }
}

// The position comes from the step buffer at run time: one recorded graph, replayed after
// the position changes, gathers the new rows.
BOOST_AUTO_TEST_CASE(replay_follows_step_position) {
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{300, 96, 200, 4, 0, true};
    auto tables = make_tables(*ctx, s, DType::F16);
    auto ids = make_ids(s.T, s.vocab, 9);
    auto dids = test::upload_bytes(*ctx, ids.data(), ids.size() * 4);
    auto step = step_buffer(*ctx, 0);
    vk::Buffer x(*ctx, uint64_t(s.T) * s.C * 4);
    Graph g(*ctx);
    ops::embed(g, whole(dids), whole(step), tables.tok, tables.pos, whole(x), s.T);
    g.record();
    for (uint32_t pos0 : {0u, 3u, 61u, 130u, 196u}) {
      set_pos(step, pos0);
      g.run();
      auto want = cpu::embed(tables.tok_f32, tables.pos_f32, s.C, ids, pos0);
      BOOST_TEST(test::max_abs_error(test::download(x, want.size()), want) == 0.0, label << " pos0=" << pos0);
    }
  }
}

// Ids past the vocabulary and positions past the context read the last row instead of
// out of bounds (the host rejects them first; the clamp is defense in depth).
BOOST_AUTO_TEST_CASE(out_of_range_ids_and_positions_are_clamped) {
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{150, 7, 10, 4, 8, true};
    auto tables = make_tables(*ctx, s, DType::F32);
    std::vector<uint32_t> ids = {150, 0xffffffffu, 149, 7};
    auto dids = test::upload_bytes(*ctx, ids.data(), ids.size() * 4);
    auto step = step_buffer(*ctx, s.pos0);  // positions 8, 9, then 10 and 11 past the context
    vk::Buffer x(*ctx, uint64_t(s.T) * s.C * 4);
    Graph g(*ctx);
    ops::embed(g, whole(dids), whole(step), tables.tok, tables.pos, whole(x), s.T);
    g.record();
    g.run();
    std::vector<uint32_t> clamped_ids, positions;
    for (uint32_t t = 0; t < s.T; ++t) {
      clamped_ids.push_back(std::min(ids[t], s.vocab - 1));
      positions.push_back(std::min(s.pos0 + t, s.context - 1));
    }
    auto want = embedded_rows(tables, s.C, clamped_ids, positions);
    BOOST_TEST(test::max_abs_error(test::download(x, want.size()), want) == 0.0, label);
  }
}

// The rows of several sequences' steps in one dispatch: row t at position pos0 + in_step of
// its table entry (a batched decode step's rows, then a prompt's three), across chunks.
BOOST_AUTO_TEST_CASE(rows_take_their_own_positions) {
  for (auto [label, ctx] : test::all_contexts())
    for (DType dt : kDTypes) {
      Shape s{300, 96, 200, 7, 0, true};
      auto tables = make_tables(*ctx, s, dt);
      auto ids = make_ids(s.T, s.vocab, 21);
      const std::vector<ops::RowEntry> rows = {{5, 0, 0}, {199, 1, 0}, {63, 2, 0}, {0, 3, 0},
                                               {62, 4, 0}, {62, 4, 1}, {62, 4, 2}};
      auto dids = test::upload_bytes(*ctx, ids.data(), ids.size() * 4);
      auto table = test::upload_bytes(*ctx, rows.data(), rows.size() * sizeof(ops::RowEntry));
      vk::Buffer x(*ctx, uint64_t(s.T) * s.C * 4);
      Graph g(*ctx);
      ops::embed_rows(g, whole(dids), whole(table), tables.tok, tables.pos, whole(x), s.T);
      g.record();
      g.run();
      std::vector<uint32_t> positions;
      for (const ops::RowEntry& r : rows) positions.push_back(r.pos0 + r.in_step);
      auto want = embedded_rows(tables, s.C, ids, positions);
      BOOST_TEST(test::max_abs_error(test::download(x, want.size()), want) == 0.0, label << " " << dtype_name(dt));
    }
}

BOOST_AUTO_TEST_SUITE_END()
