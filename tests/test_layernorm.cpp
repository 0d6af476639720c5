#include "tests/reference/elementwise.hpp"
#include "engine/ops/layernorm.hpp"
#include "tests/support/row_reduce_shapes.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

namespace {

struct Shape {
  uint32_t rows, C;
  float offset;  // added to every input: a mean far from 0 tests the two-pass variance
};

// Rows of random values in [-1, 1] around `offset`, gamma in [0.5, 1.5], beta in [-0.5, 0.5].
struct Inputs {
  std::vector<float> x, gamma, beta;
  Inputs(const Shape& s, uint32_t seed)
      : x(test::random_floats(size_t(s.rows) * s.C, seed)),
        gamma(test::random_floats(s.C, seed + 1, 0.5f, 1.5f)),
        beta(test::random_floats(s.C, seed + 2, -0.5f, 0.5f)) {
    for (auto& v : x) v += s.offset;
  }
};

// Tolerance 1e-5 of the output's largest magnitude. The reference sums in double; the
// shader sums in f32 in a different order (per-invocation strided partial sums, then a
// tree), so mean and variance carry relative errors of about sqrt(C / local) * 2^-24 (worst
// case (C / local + log2 local) * 2^-24 ~ 1.2e-5 at C = 1600 on 8 lanes). The mean error is
// relative to |mean|: with inputs of spread ~0.6 around +-10 it is ~1e-6 of the normalized
// output (measured), where a one-pass E[x^2] - mean^2 variance gives 2-3e-5 and fails.
constexpr double kTol = 1e-5;

const Shape kShapes[] = {{1, 1, 0.0f},    {3, 7, 0.0f},    {65, 96, 0.0f}, {3, 770, 0.0f},
                         {5, 1600, 0.0f}, {4, 768, 10.0f}, {2, 1600, -10.0f}};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(layernorm, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(matches_cpu_on_odd_shapes) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& s : kShapes) {
      Inputs in(s, 11 + s.C + s.rows);
      auto dx = test::upload(*ctx, in.x), dg = test::upload(*ctx, in.gamma), db = test::upload(*ctx, in.beta);
      vk::Buffer dy(*ctx, in.x.size() * 4);
      Graph g(*ctx);
      ops::layernorm(g, whole(dx), whole(dg), whole(db), whole(dy), s.rows, s.C, 1e-5f);
      g.record();
      g.run();
      std::vector<float> want(in.x.size());
      cpu::layernorm(in.x.data(), in.gamma.data(), in.beta.data(), want.data(), s.rows, s.C, 1e-5f);
      double err = test::max_rel_error(test::download(dy, want.size()), want);
      BOOST_TEST(err <= kTol, label << " rows=" << s.rows << " C=" << s.C << " offset=" << s.offset << ": " << err);
    }
}

BOOST_AUTO_TEST_CASE(every_launch_shape) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& shape : test::row_reduce_launch_shapes(*ctx))
      for (const Shape& s : {Shape{3, 7, 0.0f}, Shape{4, 1600, 0.0f}, Shape{2, 770, 10.0f}}) {
        Inputs in(s, 41 + s.C);
        auto dx = test::upload(*ctx, in.x), dg = test::upload(*ctx, in.gamma), dbeta = test::upload(*ctx, in.beta);
        vk::Buffer dy(*ctx, in.x.size() * 4);
        Graph g(*ctx);
        ops::layernorm(g, whole(dx), whole(dg), whole(dbeta), whole(dy), s.rows, s.C, 1e-5f, shape);
        g.record();
        g.run();
        std::vector<float> want(in.x.size());
        cpu::layernorm(in.x.data(), in.gamma.data(), in.beta.data(), want.data(), s.rows, s.C, 1e-5f);
        double err = test::max_rel_error(test::download(dy, want.size()), want);
        BOOST_TEST(err <= kTol, label << " " << shape.variant() << " local=" << shape.local << " C=" << s.C << ": " << err);
      }
}

// A row with no spread normalizes to beta: eps keeps 0 / sqrt(0 + eps) finite. C is a
// power of two so the mean is exact even where the device divides by multiplying with 1/C.
BOOST_AUTO_TEST_CASE(constant_rows_give_beta) {
  for (auto [label, ctx] : test::all_contexts()) {
    uint32_t rows = 3, C = 512;
    std::vector<float> x(rows * C, 2.5f);
    auto gamma = test::random_floats(C, 3), beta = test::random_floats(C, 4);
    auto dx = test::upload(*ctx, x), dg = test::upload(*ctx, gamma), db = test::upload(*ctx, beta);
    vk::Buffer dy(*ctx, x.size() * 4);
    Graph g(*ctx);
    ops::layernorm(g, whole(dx), whole(dg), whole(db), whole(dy), rows, C, 1e-5f);
    g.record();
    g.run();
    std::vector<float> want;
    for (uint32_t r = 0; r < rows; ++r) want.insert(want.end(), beta.begin(), beta.end());
    BOOST_TEST(test::max_abs_error(test::download(dy, want.size()), want) == 0.0, label);
  }
}

// In place, views at offsets into one arena, and a second op that reads the first's output.
BOOST_AUTO_TEST_CASE(in_place_chain_on_arena_views) {
  auto& ctx = test::context();
  uint32_t rows = 5, C = 96;
  uint64_t bytes = uint64_t(rows) * C * 4, stride = 4096;  // a multiple of any offset alignment
  Inputs in({rows, C, 0.0f}, 7);
  vk::Buffer arena(ctx, 2 * stride, vk::Memory::Device, "arena");
  arena.upload(in.x.data(), bytes, stride);
  auto dg = test::upload(ctx, in.gamma), db = test::upload(ctx, in.beta);
  View x{&arena, stride, bytes}, y{&arena, 0, bytes};
  Graph g(ctx);
  ops::layernorm(g, x, whole(dg), whole(db), x, rows, C, 1e-5f, "ln in place");
  ops::layernorm(g, x, whole(dg), whole(db), y, rows, C, 1e-5f, "ln again");
  g.record();
  BOOST_TEST(g.barrier_count() == 1u);
  g.run();
  std::vector<float> once(in.x.size()), twice(in.x.size()), got(in.x.size());
  cpu::layernorm(in.x.data(), in.gamma.data(), in.beta.data(), once.data(), rows, C, 1e-5f);
  cpu::layernorm(once.data(), in.gamma.data(), in.beta.data(), twice.data(), rows, C, 1e-5f);
  arena.download(got.data(), bytes, 0);
  BOOST_TEST(test::max_rel_error(got, twice) <= kTol);
}

// More rows than one grid dimension holds: the rows spill into the second dimension.
BOOST_AUTO_TEST_CASE(rows_beyond_one_grid_dimension) {
  auto& ctx = test::context();
  uint32_t rows = 65537, C = 7;  // wider than 3: among 65537 random rows of 3 some have almost no spread
  Inputs in({rows, C, 0.0f}, 5);
  auto dx = test::upload(ctx, in.x), dg = test::upload(ctx, in.gamma), db = test::upload(ctx, in.beta);
  vk::Buffer dy(ctx, in.x.size() * 4);
  Graph g(ctx);
  ops::layernorm(g, whole(dx), whole(dg), whole(db), whole(dy), rows, C, 1e-5f);
  g.record();
  g.run();
  std::vector<float> want(in.x.size());
  cpu::layernorm(in.x.data(), in.gamma.data(), in.beta.data(), want.data(), rows, C, 1e-5f);
  BOOST_TEST(test::max_rel_error(test::download(dy, want.size()), want) <= kTol);
}

BOOST_AUTO_TEST_SUITE_END()
