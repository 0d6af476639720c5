#include <cmath>
#include <limits>

#include "tests/reference/elementwise.hpp"
#include "tests/support/ops/softmax.hpp"
#include "tests/support/row_reduce_shapes.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

namespace {

struct Shape {
  uint32_t rows, cols;
  float scale;
};

// Logits in [-8, 8] (times scale) so probabilities span several orders of magnitude.
std::vector<float> logits(const Shape& s, uint32_t seed) { return test::random_floats(size_t(s.rows) * s.cols, seed, -8.0f, 8.0f); }

std::vector<float> reference(const std::vector<float>& x, const Shape& s) {
  std::vector<float> y(x.size());
  cpu::softmax(x.data(), y.data(), s.rows, s.cols, s.scale);
  return y;
}

// Runs softmax on the device; with `in_place` the output overwrites the input buffer.
std::vector<float> run_softmax(vk::Context& ctx, const std::vector<float>& x, const Shape& s, bool in_place = false) {
  auto dx = test::upload(ctx, x);
  vk::Buffer dy(ctx, x.size() * 4);
  const vk::Buffer& out = in_place ? dx : dy;
  Graph g(ctx);
  ops::softmax(g, whole(dx), whole(out), s.rows, s.cols, s.scale);
  g.record();
  g.run();
  return test::download(out, x.size());
}

// Largest error relative to each reference value, over values above `floor`.
double max_elementwise_rel_error(const std::vector<float>& got, const std::vector<float>& want, double floor) {
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(want[i]) > floor) e = std::max(e, std::fabs(double(got[i]) - want[i]) / std::fabs(want[i]));
  return e;
}

// Absolute tolerance 1e-6 on probabilities (which are <= 1): the shader works in f32 against
// a double reference, a few ulp of the largest probability (measured <= 1.2e-7). Relative
// to each probability above 1e-30 the error stays below 1e-5 (measured <= 1.5e-6): the f32
// product scale * x carries |v| * 2^-24 of absolute error into exp's argument, i.e. ~5e-7
// relative for logits near 8, plus a few ulp from exp and the compensated row sum.
constexpr double kAbsTol = 1e-6, kRelTol = 1e-5;

const Shape kShapes[] = {{1, 1, 1.0f},   {3, 7, 1.0f},      {65, 96, 0.125f},
                         {2, 770, 1.0f}, {3, 1600, 0.5f},   {3, 50257, 1.0f}};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(softmax, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(matches_cpu_on_odd_and_vocab_shapes) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& s : kShapes) {
      auto x = logits(s, 3 + s.cols + s.rows);
      auto want = reference(x, s);
      auto got = run_softmax(*ctx, x, s);
      double abs_err = test::max_abs_error(got, want), rel_err = max_elementwise_rel_error(got, want, 1e-30);
      BOOST_TEST(abs_err <= kAbsTol, label << " rows=" << s.rows << " cols=" << s.cols << ": abs " << abs_err);
      BOOST_TEST(rel_err <= kRelTol, label << " rows=" << s.rows << " cols=" << s.cols << ": rel " << rel_err);
    }
}

BOOST_AUTO_TEST_CASE(every_launch_shape) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& shape : test::row_reduce_launch_shapes(*ctx))
      for (const Shape& s : {Shape{3, 7, 1.0f}, Shape{2, 1600, 0.5f}, Shape{2, 50257, 1.0f}}) {
        if (ops::row_loop_iterations(s.cols, 2, shape.local) > ops::kCpuLoopBudget) continue;  // see below
        auto x = logits(s, 7 + s.cols);
        // A spike two thirds along each row, where a later invocation (and subgroup) holds
        // it: unless the workgroup maximum includes it, exp(scale * 300 - 8) overflows.
        for (uint32_t r = 0; r < s.rows; ++r) x[size_t(r) * s.cols + s.cols * 2 / 3] = 300.0f;
        auto dx = test::upload(*ctx, x);
        vk::Buffer dy(*ctx, x.size() * 4);
        Graph g(*ctx);
        ops::softmax(g, whole(dx), whole(dy), s.rows, s.cols, s.scale, shape);
        g.record();
        g.run();
        auto want = reference(x, s);
        auto got = test::download(dy, x.size());
        double abs_err = test::max_abs_error(got, want), rel_err = max_elementwise_rel_error(got, want, 1e-30);
        BOOST_TEST(abs_err <= kAbsTol,
                   label << " " << shape.variant() << " local=" << shape.local << " cols=" << s.cols << ": " << abs_err);
        BOOST_TEST(rel_err <= kRelTol,
                   label << " " << shape.variant() << " local=" << shape.local << " cols=" << s.cols << ": " << rel_err);
      }
}

// lavapipe ends an invocation's loops after 65535 iterations in all: a row that wide per
// invocation gets a wider workgroup from the caps-chosen shape, and an explicit shape that
// would be cut short is refused rather than silently computing part of the row.
BOOST_AUTO_TEST_CASE(rows_wider_than_the_cpu_loop_limit) {
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{2, 600000, 1.0f};
    auto x = logits(s, 29);
    double err = test::max_abs_error(run_softmax(*ctx, x, s), reference(x, s));
    BOOST_TEST(err <= kAbsTol, label << ": " << err);
    if (ctx->info().is_cpu()) {  // lavapipe's loop limit: a device fact
      vk::Buffer dx(*ctx, 4 * 50257), dy(*ctx, 4 * 50257);
      Graph g(*ctx);
      BOOST_CHECK_THROW(ops::softmax(g, whole(dx), whole(dy), 1, 50257, 1.0f, ops::RowReduce{1, false}),
                        std::logic_error);
    }
  }
}

// The output may overwrite the input.
BOOST_AUTO_TEST_CASE(in_place) {
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{4, 1000, 1.0f};
    auto x = logits(s, 17);
    BOOST_TEST(test::max_abs_error(run_softmax(*ctx, x, s, true), reference(x, s)) <= kAbsTol, label);
  }
}

// Large logits cannot overflow (the maximum is subtracted), -inf entries (masked) get
// exactly 0, and a row whose maximum comes last exercises the running-sum rescaling.
BOOST_AUTO_TEST_CASE(extreme_values) {
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{3, 37, 1.0f};
    auto x = logits(s, 5);
    for (uint32_t c = 0; c < s.cols; ++c) x[c] = 500.0f + float(c);        // row 0: huge and rising
    for (uint32_t c = 0; c < s.cols; c += 3) x[s.cols + c] = -inf;         // row 1: masked entries
    for (uint32_t c = 0; c < s.cols; ++c) x[2 * s.cols + c] = -1000.0f;    // row 2: uniform
    auto want = reference(x, s);
    auto got = run_softmax(*ctx, x, s);
    double err = test::max_abs_error(got, want);
    BOOST_TEST(err <= kAbsTol, label << ": " << err);
    for (uint32_t c = 0; c < s.cols; c += 3) BOOST_TEST(got[s.cols + c] == 0.0f, label << " masked col " << c);
  }
}

// The probabilities of every vocabulary-wide row sum to 1 within 1e-6 (measured ~1e-7):
// the compensated per-invocation sums keep 6000-term partials (8 lanes on lavapipe) exact
// to a few ulp, where plain f32 adds drift by ~1e-5.
BOOST_AUTO_TEST_CASE(rows_sum_to_one) {
  for (auto [label, ctx] : test::all_contexts()) {
    Shape s{5, 50257, 1.0f};
    auto got = run_softmax(*ctx, logits(s, 23), s);
    for (uint32_t r = 0; r < s.rows; ++r) {
      double sum = 0;
      for (uint32_t c = 0; c < s.cols; ++c) sum += got[size_t(r) * s.cols + c];
      BOOST_TEST(std::fabs(sum - 1.0) <= 1e-6, label << " row " << r << " sums to 1 + " << sum - 1.0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
