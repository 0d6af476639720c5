// The greedy pick folded into a mat-vec (ops::PickAfter, shaders/common/linear_pick_after.glsl):
// the LM head's last workgroup does what the sampler does at temperature 0. Checked against
// the contract itself: ids[0] is the lowest index of the largest value the same dispatch
// stored in y, the step's pos and rng advance by one per run, and the arrival counter is
// back at 0. Ties are placed within one workgroup and across workgroups, and the winner in
// the last, partial workgroup.
#include <algorithm>
#include <vector>

#include "tests/reference/linear.hpp"
#include "engine/dtype.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/step.hpp"
#include "engine/plan.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;

namespace {

// The lowest index of the largest value (what the sampler picks at temperature 0).
uint32_t first_argmax(const std::vector<float>& y) {
  return static_cast<uint32_t>(std::max_element(y.begin(), y.end()) - y.begin());
}

// x W^T (+ bias) on the CPU with W rounded to f16 as the device stores it.
std::vector<float> f16_product(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias,
                               uint32_t N, uint32_t K) {
  std::vector<float> y(N);
  cpu::linear(x, test::rounded_to(w, DType::F16), bias, {}, y, 1, K, N, Activation::None);
  return y;
}

struct Case {
  const char* what;
  std::vector<uint32_t> winners;  // rows set to the largest possible dot product; empty: random
  bool bias;
};

// One pick through `kernel` (N rows of K inputs) checked over two runs of its graph;
// whether the kernel picked (only the row mat-vec does, where `rows_kernel`).
bool check_pick(vk::Context& ctx, const std::string& what, uint32_t N, uint32_t K, LinearKernel kernel,
                const Case& c, bool rows_kernel) {
  auto x = test::random_floats(K, K + 1);
  auto w = test::random_floats(size_t(N) * K, K + 2, -0.5f, 0.5f);
  // A winner row is sign(x): its dot product, sum |x|, beats every row with |w| < 1,
  // and identical rows give identical sums (same f16 weights, same order of adds).
  for (uint32_t row : c.winners)
    for (uint32_t k = 0; k < K; ++k) w[size_t(row) * K + k] = x[k] < 0 ? -1.0f : 1.0f;
  Matrix m = Matrix::create(ctx, DType::F16, N, K, "pick weights");
  m.write_rows(0, N, w.data(), DType::F32);

  auto dx = test::upload(ctx, x);
  dx.try_create_texel_view();
  const auto bias = test::random_floats(N, K + 3);
  vk::Buffer dbias = test::upload(ctx, bias);
  const auto want_y = f16_product(x, w, c.bias ? bias : std::vector<float>{}, N, K);
  vk::Buffer dy(ctx, uint64_t(N) * 4, vk::Memory::Device, "logits");
  vk::Buffer ids(ctx, 4, vk::Memory::Host, "ids");
  vk::Buffer step(ctx, sizeof(StepState), vk::Memory::Host, "step");
  vk::Buffer partials(ctx, ops::pick_partials_bytes(N), vk::Memory::Device, "partials");
  vk::Buffer counter(ctx, 4, vk::Memory::Device, "counter");
  counter.fill_zero();
  const StepState start{5, 9, {0, 0}};
  step.upload(&start, sizeof start);
  const uint32_t none = 0xFFFFFFFFu;
  ids.upload(&none, 4);

  const ops::PickAfter pick{whole(ids), whole(step), whole(partials), whole(counter)};
  Graph g(ctx);
  const bool picked = ops::linear_with(g, whole(dx), m, c.bias ? whole(dbias) : View{}, whole(dy), 1,
                                       {.kernel = kernel, .name = "lm_head", .pick_after = &pick});
  // Only the row mat-vec (CPU devices) picks; GPU kernels leave it to the sampler.
  BOOST_TEST(picked == rows_kernel, what);
  if (!picked) return false;
  g.record();
  for (uint32_t run = 1; run <= 2; ++run) {
    g.run();
    const auto y = test::download(dy, N);
    uint32_t got = 0;
    ids.download(&got, 4);
    StepState s{};
    step.download(&s, sizeof s);
    // f32 sums of f16 weights against double sums of the same weights.
    BOOST_TEST(test::max_rel_error(y, want_y) <= 1e-4, what << " run " << run << ": logits");
    const uint32_t want = first_argmax(y);
    BOOST_TEST(got == want, what << " run " << run);
    if (!c.winners.empty())
      BOOST_TEST(want == *std::min_element(c.winners.begin(), c.winners.end()), what << ": tie setup");
    BOOST_TEST(s.pos == start.pos + run, what);
    BOOST_TEST(s.rng_step == start.rng_step + run, what);
  }
  uint32_t left = 1;
  counter.download(&left, 4);
  BOOST_TEST(left == 0u, what << ": the counter is back at 0");
  return true;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pick_after, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(picks_the_lowest_index_of_the_largest_output) {
  // N = 2500: 20 or 40 workgroups of 128 or 64 rows (more than the last workgroup's lanes,
  // so some lanes compare partials in turn) and a partial last one. K = 96 takes the held-x
  // kernel, K = 1032 (over kMaxHeldInputs) the streaming one under Auto (either takes the
  // column split instead where the device prefers it).
  const uint32_t N = 2500;
  const Case cases[] = {{"random, with bias", {}, true},
                        {"tie within one invocation and one workgroup", {21, 5, 3, 40}, false},
                        {"tie across workgroups", {2499, 1287, 261}, false},
                        {"winner in the last, partial workgroup", {2498}, false}};
  size_t picks_checked = 0;
  for (auto [label, ctx] : test::all_contexts()) {
    for (uint32_t K : {96u, 1032u}) {
      for (LinearKernel kernel :
           {LinearKernel::Auto, LinearKernel::MatVecRows, LinearKernel::MatVecRowsHeld, LinearKernel::MatVecCols}) {
        if (kernel == LinearKernel::MatVecRowsHeld && !ops::held_x_fits(K, DType::F16)) continue;
        if (kernel == LinearKernel::MatVecCols && !ops::column_split_fits(*ctx, K, DType::F16)) continue;
        // The row mat-vec needs subgroup shuffles of one SIMD vector (not on the forced
        // fallback device, nor on GPUs); Auto takes it for one token on CPU devices.
        const bool rows_ok = ops::row_matvec_supported(*ctx) && ctx->caps().subgroup_arithmetic;
        if (kernel != LinearKernel::Auto && !rows_ok) continue;
        const bool rows_kernel = rows_ok && (kernel != LinearKernel::Auto || ctx->cpu_kernels());
        for (const Case& c : cases) {
          const std::string what = label + " K=" + std::to_string(K) + " kernel " +
                                   std::to_string(static_cast<int>(kernel)) + ": " + c.what;
          picks_checked += check_pick(*ctx, what, N, K, kernel, c, rows_kernel);
        }
      }
    }
  }
  // Where no kernel picks (GPUs), the checks above are only that none claims to.
  BOOST_TEST_MESSAGE(picks_checked << " picks checked");
}

// A pick view too small for the dispatch is refused when the graph is built, not overrun.
BOOST_AUTO_TEST_CASE(rejects_short_pick_views) {
  auto& ctx = test::context();
  if (!ctx.cpu_kernels() || !ops::row_matvec_supported(ctx)) {  // only the row mat-vec picks
    BOOST_TEST_MESSAGE("no row mat-vec on this device (it alone picks): skipped");
    return;
  }
  const uint32_t N = 2500, K = 96;
  Matrix m = Matrix::create(ctx, DType::F16, N, K, "pick weights");
  auto w = test::random_floats(size_t(N) * K, 1);
  m.write_rows(0, N, w.data(), DType::F32);
  auto dx = test::upload(ctx, test::random_floats(K, 2));
  dx.try_create_texel_view();
  vk::Buffer dy(ctx, uint64_t(N) * 4, vk::Memory::Device, "logits");
  vk::Buffer ids(ctx, 4, vk::Memory::Host, "ids"), step(ctx, sizeof(StepState), vk::Memory::Host, "step");
  vk::Buffer small(ctx, 8, vk::Memory::Device, "partials"), counter(ctx, 4, vk::Memory::Device, "counter");
  const ops::PickAfter pick{whole(ids), whole(step), whole(small), whole(counter)};
  Graph g(ctx);
  BOOST_CHECK_THROW(
      ops::linear_with(g, whole(dx), m, {}, whole(dy), 1, {.name = "lm_head", .pick_after = &pick}),
      std::invalid_argument);
}

// `gpt-vk devices -v` says the LayerNorm and greedy pick ride on the mat-vec's last
// workgroup only where the decode kernel has those variants: a CPU device's row kernels
// with subgroup arithmetic. It said so of every CPU device, those with shuffles only too.
BOOST_AUTO_TEST_CASE(devices_v_says_the_fusions_only_where_the_kernels_have_them) {
  const PlanModel gpt2_small{true, 12, true, 256, {12, 64, 1024, true}, true};
  const std::string fused = "greedy pick: in the LM head's last workgroup";
  const std::string shuffles_only = describe_plan(test::shuffles_only_context(), gpt2_small);
  BOOST_TEST_INFO(shuffles_only);
  BOOST_TEST(shuffles_only.find("LayerNorms: after each residual add") == std::string::npos);
  BOOST_TEST(shuffles_only.find(fused) == std::string::npos);
  const vk::Context& ctx = test::context();
  if (ctx.cpu_kernels() && ctx.caps().subgroup_arithmetic && ops::row_matvec_supported(ctx)) {
    const std::string native = describe_plan(ctx, gpt2_small);
    BOOST_TEST_INFO(native);
    BOOST_TEST(native.find(fused) != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
