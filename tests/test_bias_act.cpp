#include <cmath>

#include "tests/reference/elementwise.hpp"
#include "tests/support/ops/bias_act.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

namespace {

struct Shape {
  uint32_t rows, cols;
};

// Widths a multiple of 4 take the vec4 shader, the others the scalar one.
const Shape kShapes[] = {{1, 1}, {3, 7}, {65, 96}, {3, 770}, {2, 1600}, {1, 3072}};
const Activation kActs[] = {Activation::None, Activation::GeluTanh, Activation::GeluErf, Activation::Relu};

const char* act_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::GeluErf: return "gelu_erf";
    case Activation::Relu: return "relu";
  }
  return "?";
}

// Largest |got - want| / max(1, |want|). Tolerance 1e-5: the shader's erf is a polynomial
// with absolute error ~1.2e-7, its tanh is built from exp (a few ulp), against the
// reference's double std::erf / std::tanh; 0.5 * x * (1 + ...) then scales the error by
// at most |x| / 2 <= 4 here. None and relu are exact (one f32 add, then a compare).
double max_scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i])));
    if (std::isnan(d)) return INFINITY;
    e = std::max(e, d);
  }
  return e;
}
constexpr double kTol = 1e-5;

double tolerance(Activation a) { return a == Activation::None || a == Activation::Relu ? 0.0 : kTol; }

// x in [-6, 6] (past where erf and tanh saturate), bias in [-2, 2].
void check(vk::Context& ctx, const std::string& label, const Shape& s, Activation act, bool in_place) {
  auto x = test::random_floats(size_t(s.rows) * s.cols, 31 + s.cols + s.rows, -6.0f, 6.0f);
  auto bias = test::random_floats(s.cols, 37 + s.cols, -2.0f, 2.0f);
  auto dx = test::upload(ctx, x), db = test::upload(ctx, bias);
  vk::Buffer dy(ctx, x.size() * 4);
  const vk::Buffer& out = in_place ? dx : dy;
  Graph g(ctx);
  ops::bias_act(g, whole(dx), whole(db), whole(out), s.rows, s.cols, act);
  g.record();
  g.run();
  std::vector<float> want(x.size());
  cpu::bias_act(x.data(), bias.data(), want.data(), s.rows, s.cols, act);
  double err = max_scaled_error(test::download(out, x.size()), want);
  BOOST_TEST(err <= tolerance(act), label << " " << act_name(act) << " rows=" << s.rows << " cols=" << s.cols
                                          << (in_place ? " in place" : "") << ": " << err);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(bias_act, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(matches_cpu_for_every_activation) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& s : kShapes)
      for (Activation act : kActs) check(*ctx, label, s, act, false);
}

// In place, with 4-wide (cols % 4 == 0) and scalar accesses.
BOOST_AUTO_TEST_CASE(in_place) {
  for (auto [label, ctx] : test::all_contexts())
    for (Activation act : kActs) {
      check(*ctx, label, {5, 130}, act, true);
      check(*ctx, label, {5, 128}, act, true);
    }
}

// More rows than the grid's row groups: each group strides over several rows.
BOOST_AUTO_TEST_CASE(many_rows) {
  check(test::context(), "native", {70001, 3}, Activation::GeluTanh, false);
  check(test::context(), "native", {1500, 770}, Activation::GeluErf, false);
  check(test::context(), "native", {1100, 3072}, Activation::Relu, false);
}

// Large inputs saturate without overflow: gelu(x) -> x for x >> 0, -> 0 for x << 0.
BOOST_AUTO_TEST_CASE(saturation) {
  auto& ctx = test::context();
  std::vector<float> x = {-1e4f, -100.0f, -20.0f, -9.0f, 9.0f, 20.0f, 100.0f, 1e4f};
  std::vector<float> bias(x.size(), 0.0f);
  for (Activation act : {Activation::GeluTanh, Activation::GeluErf}) {
    auto dx = test::upload(ctx, x), db = test::upload(ctx, bias);
    vk::Buffer dy(ctx, x.size() * 4);
    Graph g(ctx);
    ops::bias_act(g, whole(dx), whole(db), whole(dy), 1, uint32_t(x.size()), act);
    g.record();
    g.run();
    std::vector<float> want(x.size());
    cpu::bias_act(x.data(), bias.data(), want.data(), 1, uint32_t(x.size()), act);
    double err = max_scaled_error(test::download(dy, x.size()), want);
    BOOST_TEST(err <= kTol, act_name(act) << ": " << err);
  }
}

BOOST_AUTO_TEST_SUITE_END()
