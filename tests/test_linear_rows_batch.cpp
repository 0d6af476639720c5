// Batched decode steps count on this (ExecutionPlan::batch_linear_kernel): every token row
// of the batched row mat-vec (ops::LinearKernel::MatVecRowsBatch) and of the CPU GEMMs that
// broadcast weights over the lanes (GemmRegisters, GemmRegistersWide) is bit-identical to
// the one-token row mat-vec's (MatVecRows and, where x fits, MatVecRowsHeld) on that row
// alone: for every dtype, with inputs that end in a partial weight word, tokens that do not
// fill the last workgroup, more tokens than one workgroup takes, and the fused epilogue
// (bias, GELU, residual). Equality to the row kernels carries their CPU-reference checks
// (test_linear). On GPUs the same holds for the split-K mat-vec over several tokens against
// its own one-token runs (the last case).
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "engine/ops/linear.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;

namespace {

// y = x W^T + b, GELU, plus r, for T tokens through `kernel`; x gets a texel view.
std::vector<float> run(vk::Context& ctx, LinearKernel kernel, const Matrix& W, const std::vector<float>& x,
                       const std::vector<float>& bias, const std::vector<float>& r, uint32_t T) {
  auto dx = test::upload(ctx, x);
  dx.try_create_texel_view();
  auto db = test::upload(ctx, bias);
  auto dy = test::upload(ctx, r);  // the residual, added in place
  Graph g(ctx);
  ops::linear_with(g, whole(dx), W, whole(db), whole(dy), T,
                   {.kernel = kernel, .ep = {Activation::GeluTanh, true}, .r = whole(dy)});
  g.record();
  g.run();
  return test::download(dy, size_t(T) * W.rows);
}

struct Shape {
  DType dt;
  uint32_t K, N, T;
};

std::ostream& operator<<(std::ostream& out, const Shape& s) {
  return out << dtype_name(s.dt) << " K=" << s.K << " N=" << s.N << " T=" << s.T;
}

// The cases on the CPU mat-vecs (rows, column split) run where the device has them: CPU
// devices (GPUs take other kernels for every token count).
auto has_cpu_matvecs() {
  return test::device_has([](vk::Context& c) { return ops::row_matvec_supported(c) && c.caps().texel_uvec4; },
                          "has no CPU row or column-split mat-vec: nothing to compare");
}

// One shape's random weights, its T tokens' inputs and residuals, and the bias.
struct Case {
  Case(vk::Context& ctx, const Shape& s, uint32_t& seed)
      : shape(s), W(Matrix::create(ctx, s.dt, s.N, s.K, "test weights")) {
    const std::vector<float> w = test::random_floats(size_t(s.N) * s.K, seed++);
    W.write_rows(0, s.N, w.data(), DType::F32);
    x = test::random_floats(size_t(s.T) * s.K, seed++);
    bias = test::random_floats(s.N, seed++);
    r = test::random_floats(size_t(s.T) * s.N, seed++);
  }
  // All T tokens through `kernel`, or token t alone.
  std::vector<float> all(vk::Context& ctx, LinearKernel kernel) const { return run(ctx, kernel, W, x, bias, r, shape.T); }
  std::vector<float> alone(vk::Context& ctx, LinearKernel kernel, uint32_t t) const {
    return run(ctx, kernel, W, part(x, t, shape.K), bias, part(r, t, shape.N), 1);
  }
  // Token t's row of all tokens' outputs.
  std::vector<float> row(const std::vector<float>& y, uint32_t t) const { return part(y, t, shape.N); }

  static std::vector<float> part(const std::vector<float>& v, uint32_t t, uint32_t n) {
    return std::vector<float>(v.begin() + size_t(t) * n, v.begin() + size_t(t + 1) * n);
  }
  Shape shape;
  Matrix W;
  std::vector<float> x, bias, r;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(linear_rows_batch, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(each_token_row_equals_the_one_token_row_kernel_bit_for_bit,
                     *has_cpu_matvecs()) {
  vk::Context& ctx = test::context();
  const Shape shapes[] = {{DType::F16, 768, 200, 8}, {DType::F16, 3072, 77, 16}, {DType::BF16, 132, 130, 5},
                          {DType::F32, 516, 64, 21}, {DType::F16, 36, 9, 2},     {DType::F16, 256, 1000, 40},
                          {DType::Q8_0, 768, 70, 16}, {DType::Q8_0, 1056, 40, 9},  {DType::Q4_0, 320, 40, 16}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    BOOST_TEST_CONTEXT(s) {
      const Case c(ctx, s, seed);
      std::vector<std::vector<float>> alone;  // [t]: token t through the row kernel, alone
      for (uint32_t t = 0; t < s.T; ++t) {
        alone.push_back(c.alone(ctx, LinearKernel::MatVecRows, t));
        if (ops::held_x_fits(s.K, s.dt))
          BOOST_TEST((c.alone(ctx, LinearKernel::MatVecRowsHeld, t) == alone[t]), "held x, token " << t);
      }
      // The batched row kernel, and the CPU GEMMs where they broadcast the weights (subgroup
      // arithmetic): ExecutionPlan::batch_linear_kernel counts on their order.
      std::vector<LinearKernel> batched_kernels;
      if (!is_quantized(s.dt)) batched_kernels.push_back(LinearKernel::MatVecRowsBatch);  // 16-bit and f32 words only
      if (ctx.caps().subgroup_arithmetic)
        batched_kernels.insert(batched_kernels.end(), {LinearKernel::GemmRegisters, LinearKernel::GemmRegistersWide});
      for (LinearKernel k : batched_kernels) {
        const auto batched = c.all(ctx, k);
        for (uint32_t t = 0; t < s.T; ++t) BOOST_TEST((c.row(batched, t) == alone[t]), "kernel " << int(k) << ", token " << t);
      }
    }
  }
}

// The column-split mat-vec over several tokens (a batched decode step with exact rows where
// the one-token step takes MatVecCols, as on AMD Zen 5 hosts): every token row equals that token
// alone through MatVecCols, for float and block-quantized weights, inputs ending in a
// partial word, token counts that leave the last workgroup short, and inputs wide enough
// that a workgroup holds fewer tokens (3072 f16 inputs: 2 a workgroup on 8 lanes).
BOOST_AUTO_TEST_CASE(column_split_matvec_over_tokens_equals_each_token_alone_bit_for_bit,
                     *has_cpu_matvecs()) {
  vk::Context& ctx = test::context();
  const Shape shapes[] = {{DType::F16, 768, 200, 8}, {DType::F16, 3072, 77, 5},  {DType::BF16, 132, 130, 16},
                          {DType::F32, 516, 64, 11}, {DType::Q8_0, 768, 70, 9}, {DType::Q4_0, 320, 40, 16}};
  uint32_t seed = 50;
  for (const Shape& s : shapes) {
    BOOST_TEST_CONTEXT(s) {
      const Case c(ctx, s, seed);
      const auto batched = c.all(ctx, LinearKernel::MatVecColsBatch);
      for (uint32_t t = 0; t < s.T; ++t)
        BOOST_TEST((c.row(batched, t) == c.alone(ctx, LinearKernel::MatVecCols, t)), "token " << t);
    }
  }
}

// The split-K mat-vec over several tokens (a GPU's batched decode step with exact rows:
// up to 8 tokens a workgroup, each weight word loaded once for them): every token row equals
// that token alone through the same kernel, on this device and with a GPU's kernels, for
// float and block-quantized weights, inputs ending in a partial word, token counts that
// leave the last workgroup short.
BOOST_AUTO_TEST_CASE(split_k_matvec_over_tokens_equals_each_token_alone_bit_for_bit) {
  const Shape shapes[] = {{DType::F16, 36, 50, 3}, {DType::F32, 300, 70, 9}, {DType::BF16, 256, 33, 16}, {DType::Q8_0, 320, 40, 5}};
  uint32_t seed = 100;
  for (auto [label, ctx] : test::native_and_gpu_contexts()) {
    for (const Shape& s : shapes) {
      BOOST_TEST_CONTEXT(label << ", " << s) {
        const Case c(*ctx, s, seed);
        const auto all = c.all(*ctx, LinearKernel::MatVec);
        for (uint32_t t = 0; t < s.T; ++t)
          BOOST_TEST((c.row(all, t) == c.alone(*ctx, LinearKernel::MatVec, t)), "token " << t);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
