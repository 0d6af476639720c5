#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tests/reference/sample.hpp"
#include "engine/error.hpp"
#include "engine/ops/sample.hpp"
#include "engine/ops/step.hpp"
#include "tests/support/vk_test.hpp"

// ops::sample_rows: every row of a batch sampled in one dispatch with its own parameters
// must give exactly the token ops::sample gives for that row alone.

using namespace gptvk;
using ops::SamplingParams;

namespace {

// Logits shaped like a language model's (test::lm_logits), or, for `tied`, rounded to
// steps of 0.5 so the largest logits and the top-k / top-p thresholds tie.
std::vector<float> row_logits(uint32_t vocab, uint32_t seed, bool tied) {
  std::vector<float> v = test::lm_logits(vocab, seed, 2.5f);
  if (tied)
    for (auto& x : v) x = std::round(x * 2.0f) / 2.0f;
  return v;
}

// One row's sampler and the counter it draws with.
struct Row {
  SamplingParams p;
  uint32_t rng_step;
  uint32_t same_as = 0;  // SampleRow::same_as: 0, or r + 1 to draw from row r's logits
};

// ids[b] from one sample_rows dispatch over rows of `vocab` logits, with `filters` (or the
// union of the rows' when ~0u). `ids` holds one word past the rows, which must stay as set.
std::vector<uint32_t> sample_rows(vk::Context& ctx, const std::vector<float>& logits, const std::vector<Row>& rows,
                                  uint32_t vocab, uint32_t filters = ~0u) {
  auto n = static_cast<uint32_t>(rows.size());
  std::vector<ops::SampleRow> table;
  uint32_t all = 0;
  for (const Row& r : rows) {
    table.push_back(ops::sample_row(r.p, r.rng_step));
    table.back().same_as = r.same_as;
    all |= ops::sampler_filters(r.p, vocab);
  }
  auto dl = test::upload(ctx, logits);
  auto dt = test::upload_bytes(ctx, table.data(), table.size() * sizeof(ops::SampleRow));
  std::vector<uint32_t> ids(n + 1, 0xdeadbeef);
  auto dids = test::upload_bytes(ctx, ids.data(), ids.size() * 4);
  vk::Buffer scratch(ctx, n * ops::sample_scratch_bytes(vocab));
  Graph g(ctx);
  ops::sample_rows(g, whole(dl), n, whole(dt), whole(dids), whole(scratch), vocab, filters == ~0u ? all : filters);
  g.record();
  g.run();
  dids.download(ids.data(), ids.size() * 4);
  BOOST_TEST(ids[n] == 0xdeadbeefu, "the word after the last row's id was written");
  return {ids.begin(), ids.begin() + n};
}

// What ops::sample gives for these logits alone, with its step buffer's counter at rng_step.
uint32_t sample_alone(vk::Context& ctx, const float* logits, uint32_t vocab, const Row& r) {
  auto dl = test::upload(ctx, std::vector<float>(logits, logits + vocab));
  vk::Buffer ids(ctx, 4), step(ctx, sizeof(StepState), vk::Memory::Host), scratch(ctx, ops::sample_scratch_bytes(vocab));
  StepState s{5, r.rng_step, {0, 0}};
  step.upload(&s, sizeof s);
  Graph g(ctx);
  ops::sample(g, whole(dl), whole(ids), whole(step), whole(scratch), vocab, r.p);
  g.record();
  g.run();
  uint32_t id = 0;
  ids.download(&id, 4);
  return id;
}

// A mix of samplers: greedy (also with filter values that greedy ignores), temperature
// alone, top-k (1, moderate, beyond the vocabulary), top-p, both; distinct seeds (some
// past 32 bits) and counters (some near the top of the range).
std::vector<Row> mixed_rows(uint32_t n, uint32_t vocab) {
  const std::vector<SamplingParams> kinds = {
      {0.0f, 0, 1.0f},    {0.8f, 0, 1.0f},   {1.0f, 40, 1.0f},    {1.2f, 0, 0.9f},
      {0.7f, 40, 0.95f},  {0.0f, 5, 0.5f},   {1.0f, vocab + 3, 1.0f}, {0.5f, 1, 1.0f},
      {2.0f, 200, 0.6f},  {0.9f, 0, 0.3f},   {1.0f, vocab, 0.99f}, {0.05f, 3, 1.0f},
  };
  std::vector<Row> rows;
  for (uint32_t b = 0; b < n; ++b) {
    SamplingParams p = kinds[(b * 5 + (n == 1 ? 4 : n)) % kinds.size()];  // each row count starts elsewhere
    p.seed = b % 3 == 2 ? (uint64_t(b) << 33) + 17 : 1000 + 7 * b;
    rows.push_back({p, b % 4 == 3 ? 0xfffffff0u + b : 13 * b + 1});
  }
  return rows;
}

std::string describe(uint32_t b, const Row& r) {
  return "row " + std::to_string(b) + " T=" + std::to_string(r.p.temperature) + " k=" + std::to_string(r.p.top_k) +
         " p=" + std::to_string(r.p.top_p) + " rng=" + std::to_string(r.rng_step);
}

// Every row of a sample_rows dispatch against sample() alone on that row; greedy rows also
// against the CPU argmax.
void check_rows(vk::Context& ctx, const std::string& label, const std::vector<float>& logits, const std::vector<Row>& rows,
                uint32_t vocab, uint32_t filters = ~0u) {
  auto got = sample_rows(ctx, logits, rows, vocab, filters);
  for (uint32_t b = 0; b < rows.size(); ++b) {
    const float* x = logits.data() + uint64_t(b) * vocab;
    BOOST_TEST(got[b] == sample_alone(ctx, x, vocab, rows[b]), label << " " << describe(b, rows[b]));
    if (rows[b].p.temperature == 0.0f)
      BOOST_TEST(got[b] == cpu::argmax(x, vocab), label << " greedy " << describe(b, rows[b]));
  }
}

std::vector<float> batch_logits(uint32_t rows, uint32_t vocab, bool some_tied) {
  std::vector<float> all;
  for (uint32_t b = 0; b < rows; ++b) {
    auto x = row_logits(vocab, vocab * 31 + b, some_tied && b % 2 == 1);
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(sample_rows_suite, test::NoValidationMessages)

// Rows mixing every sampler kind, on GPT-2's vocabulary and small odd ones, with the union
// of the rows' filters: each row as sample() gives it alone.
BOOST_AUTO_TEST_CASE(each_row_matches_sample_alone) {
  for (auto [label, ctx] : test::all_contexts())
    for (uint32_t vocab : {37u, 1000u, 50257u})
      for (uint32_t rows : {1u, 3u, 16u}) {
        auto logits = batch_logits(rows, vocab, true);
        check_rows(*ctx, label + " vocab=" + std::to_string(vocab) + " rows=" + std::to_string(rows), logits,
                   mixed_rows(rows, vocab), vocab);
      }
}

// Rows that use no filter (greedy, temperature alone, top-k at or past the vocabulary with
// top-p 1) under a pipeline with every stage on, as when other rows of the batch filter.
BOOST_AUTO_TEST_CASE(rows_without_filters_under_every_stage) {
  for (auto [label, ctx] : test::all_contexts())
    for (uint32_t vocab : {37u, 50257u}) {
      std::vector<Row> rows = {{{0.0f, 0, 1.0f, 3}, 4},      {{1.0f, vocab + 100, 1.0f, 4}, 9},
                               {{0.9f, vocab, 1.0f, 5}, 2},  {{1.0f, 0, 1.0f, 6}, 77},
                               {{0.0f, 7, 0.2f, 7}, 0}};
      auto logits = batch_logits(static_cast<uint32_t>(rows.size()), vocab, false);
      // Greedy rows: the argmax tied at three places (the lowest index wins).
      for (uint32_t i : {vocab / 2, vocab - 1, vocab / 3}) logits[i] = logits[4 * vocab + i] = 40.0f;
      for (uint32_t filters : {1u, 7u})
        check_rows(*ctx, label + " vocab=" + std::to_string(vocab) + " filters=" + std::to_string(filters), logits,
                   rows, vocab, filters);
    }
}

// The same logits in every row with one sampler and consecutive counters: sample_many's
// draws, which the rows must reproduce (a second, independent reference).
BOOST_AUTO_TEST_CASE(same_row_with_consecutive_counters_is_sample_many) {
  for (auto [label, ctx] : test::all_contexts()) {
    constexpr uint32_t kVocab = 1000, kRows = 16;
    auto x = row_logits(kVocab, 5, false);
    SamplingParams p{1.0f, 100, 0.95f, 42};
    std::vector<float> logits;
    std::vector<Row> rows;
    for (uint32_t b = 0; b < kRows; ++b) {
      logits.insert(logits.end(), x.begin(), x.end());
      rows.push_back({p, 300 + b});
    }
    auto dl = test::upload(*ctx, x);
    vk::Buffer ids(*ctx, kRows * 4), step(*ctx, sizeof(StepState), vk::Memory::Host),
        scratch(*ctx, kRows * ops::sample_scratch_bytes(kVocab));
    StepState s{0, 300, {0, 0}};
    step.upload(&s, sizeof s);
    Graph g(*ctx);
    ops::sample_many(g, whole(dl), whole(ids), whole(step), whole(scratch), kVocab, kRows, p);
    g.record();
    g.run();
    std::vector<uint32_t> many(kRows);
    ids.download(many.data(), kRows * 4);
    BOOST_TEST(sample_rows(*ctx, logits, rows, kVocab) == many, label);
  }
}

// A row whose same_as names another row (a twin prompt's, models/decode_batch.hpp) draws
// from that row's logits with its own parameters and counter; its own row, filled with
// values that would win every draw, is never read.
BOOST_AUTO_TEST_CASE(a_row_draws_from_the_logits_its_same_as_names) {
  auto& ctx = test::context();
  const uint32_t vocab = 5000;
  std::vector<Row> rows = mixed_rows(7, vocab);
  const uint32_t source[] = {0, 1, 2, 0, 0, 1, 2};
  std::vector<float> logits = batch_logits(7, vocab, true);
  for (uint32_t b = 3; b < 7; ++b) {
    rows[b].same_as = source[b] + 1;
    std::fill_n(logits.begin() + uint64_t(b) * vocab, vocab, 1e30f);
  }
  const std::vector<uint32_t> got = sample_rows(ctx, logits, rows, vocab);
  for (uint32_t b = 0; b < rows.size(); ++b)
    BOOST_TEST(got[b] == sample_alone(ctx, logits.data() + uint64_t(source[b]) * vocab, vocab, rows[b]),
               describe(b, rows[b]));
}

BOOST_AUTO_TEST_CASE(rejects_what_it_cannot_do) {
  SamplingParams controlled;
  controlled.min_p = 0.1f;
  BOOST_CHECK_THROW(ops::sample_row(controlled, 0), std::logic_error);
  SamplingParams biased;
  biased.logit_bias = {{3, 1.0f}};
  BOOST_CHECK_THROW(ops::sample_row(biased, 0), std::logic_error);
  BOOST_CHECK_THROW(ops::sample_row(SamplingParams{-1.0f}, 0), UsageError);
  BOOST_CHECK_THROW(ops::sample_row(SamplingParams{1.0f, 0, 0.0f}, 0), UsageError);

  auto row = ops::sample_row(SamplingParams{0.5f, 9, 0.75f, (uint64_t(3) << 32) | 11}, 12);
  BOOST_TEST((row.temperature == 0.5f && row.top_k == 9u && row.top_p == 0.75f && row.seed_lo == 11u &&
              row.seed_hi == 3u && row.rng_step == 12u && row.same_as == 0u && row.pad1 == 0u));
  BOOST_TEST(ops::sampler_filters(SamplingParams{0.0f, 5, 0.5f}, 100) == 0u);
  BOOST_TEST(ops::sampler_filters(SamplingParams{1.0f, 100, 1.0f}, 100) == 1u);
  BOOST_TEST(ops::sampler_filters(SamplingParams{1.0f, 99, 0.5f}, 100) == 7u);
  // Min-p is a sampler stage (bit 3), never a row's: sample_row() refused it above, and
  // sample_rows() refuses the bit below.
  SamplingParams min_p{1.0f, 99, 0.5f};
  min_p.min_p = 0.1f;
  BOOST_TEST(ops::sampler_filters(min_p, 100) == 15u);
  min_p.temperature = 0.0f;
  BOOST_TEST(ops::sampler_filters(min_p, 100) == 0u);

  auto& ctx = test::context();
  constexpr uint32_t kVocab = 100, kRows = 4;
  vk::Buffer logits(ctx, kRows * kVocab * 4), table(ctx, kRows * sizeof(ops::SampleRow)), ids(ctx, kRows * 4),
      scratch(ctx, kRows * ops::sample_scratch_bytes(kVocab)), short_scratch(ctx, ops::sample_scratch_bytes(kVocab));
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::sample_rows(g, whole(logits), kRows, whole(table), whole(ids), whole(scratch), kVocab, 8),
                    std::logic_error);
  BOOST_CHECK_THROW(
      ops::sample_rows(g, whole(logits), kRows, whole(table), whole(ids), whole(short_scratch), kVocab, 7),
      std::logic_error);
  BOOST_CHECK_THROW(ops::sample_rows(g, whole(logits), kRows + 1, whole(table), whole(ids), whole(scratch), kVocab, 7),
                    std::logic_error);
  BOOST_CHECK_THROW(ops::sample_rows(g, whole(logits), 0, whole(table), whole(ids), whole(scratch), kVocab, 7),
                    std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()
