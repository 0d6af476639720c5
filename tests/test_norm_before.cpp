// The LayerNorm of x folded into the mat-vec that reads it (ops::NormBefore, the _lnin
// variant of shaders/common/linear_matvec.glsl): y = act(W LN(x) + b) computed as
// rstd * (W (gamma * x) - mean * W gamma) + (W beta + b), with W gamma and W beta + b made
// by the linear op itself, as models/gpt_model.cpp makes them. Checked against the CPU
// reference (LayerNorm, then the linear with the stored weights) on every device, dtype and
// mat-vec shape, with W in one piece and in chunks, and with inputs whose mean is several
// times their spread (the variance comes from E[x^2] - mean^2).
#include <stdexcept>
#include <vector>

#include "tests/reference/elementwise.hpp"
#include "tests/reference/linear.hpp"
#include "engine/dtype.hpp"
#include "engine/error.hpp"
#include "engine/ops/linear.hpp"
#include "engine/tensor.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;

namespace {

constexpr double kTol = 1e-4;  // max |got - want| / max |want|, as tests/test_linear.cpp

struct Case {
  DType dt;
  LinearKernel kernel;
  uint32_t K, N;
  uint64_t chunk_rows;  // 0: W in one piece
  float mean;           // added to every input
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(norm_before, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(folded_layernorm_matches_cpu) {
  const float eps = 1e-5f;
  // N = 770: the last workgroup of every shape is partial; chunks of 192 rows (3 blocks
  // of kChunkRowAlign), the last one 2 rows.
  const Case cases[] = {{DType::F32, LinearKernel::Auto, 96, 770, 0, 0.0f},
                        {DType::F16, LinearKernel::MatVec, 96, 770, 3 * kChunkRowAlign, 2.0f},
                        {DType::BF16, LinearKernel::MatVecWide, 96, 770, 0, -3.0f},
                        {DType::F16, LinearKernel::Auto, 1600, 200, 0, 0.5f},
                        {DType::F32, LinearKernel::MatVecWide, 1600, 770, 3 * kChunkRowAlign, 1.0f}};
  for (auto [label, ctx] : test::all_contexts()) {
    for (const Case& c : cases) {
      const std::string what = label + " dtype " + dtype_name(c.dt) + " K=" + std::to_string(c.K) +
                               " N=" + std::to_string(c.N) + " chunks=" + std::to_string(c.chunk_rows != 0) +
                               " mean=" + std::to_string(c.mean);
      auto x = test::random_floats(c.K, c.K + 1);
      for (float& v : x) v += c.mean;
      auto gamma = test::random_floats(c.K, c.K + 2, 0.5f, 1.5f), beta = test::random_floats(c.K, c.K + 3);
      auto bias = test::random_floats(c.N, c.K + 4);
      auto w = test::random_floats(size_t(c.N) * c.K, c.K + 5);
      const uint64_t chunk_bytes = c.chunk_rows * c.K * dtype_bytes(c.dt);
      Matrix W = Matrix::create(*ctx, c.dt, c.N, c.K, "test weights", chunk_bytes);
      W.write_rows(0, c.N, w.data(), DType::F32);
      if (c.chunk_rows) BOOST_TEST_REQUIRE(W.chunks.size() > 1u);

      // Reference: y = gelu(W LN(x) + b) with the stored weights.
      std::vector<float> normed(c.K), want(c.N);
      cpu::layernorm(x.data(), gamma.data(), beta.data(), normed.data(), 1, c.K, eps);
      cpu::linear(normed, test::rounded_to(w, c.dt), bias, {}, want, 1, c.K, c.N, Activation::GeluTanh);

      auto dx = test::upload(*ctx, x), dg = test::upload(*ctx, gamma), dbeta = test::upload(*ctx, beta);
      auto dbias = test::upload(*ctx, bias);
      vk::Buffer row_gamma(*ctx, c.N * 4, vk::Memory::Device, "W gamma");
      vk::Buffer shift(*ctx, c.N * 4, vk::Memory::Device, "W beta + b");
      vk::Buffer dy(*ctx, c.N * 4, vk::Memory::Device, "y");
      {
        Graph g(*ctx);
        ops::linear(g, whole(dg), W, View{}, whole(row_gamma), 1);
        ops::linear(g, whole(dbeta), W, whole(dbias), whole(shift), 1);
        g.record();
        g.run();
      }
      BOOST_TEST_REQUIRE(ops::norm_before_fits(W));
      const ops::NormBefore ln{whole(dg), whole(row_gamma), eps};
      Graph g(*ctx);
      ops::linear_with(g, whole(dx), W, whole(shift), whole(dy), 1,
                       {.kernel = c.kernel, .ep = {Activation::GeluTanh, false}, .norm_before = &ln});
      g.record();
      g.run();
      BOOST_TEST(test::max_rel_error(test::download(dy, c.N), want) <= kTol, what);
    }
  }
}

// Several tokens at once (a GPU's batched decode step with exact rows): each token's row of
// y bit-identical to that token's product alone, whatever its mean and spread.
BOOST_AUTO_TEST_CASE(several_tokens_each_equal_their_own_product_bit_for_bit) {
  const uint32_t K = 160, N = 300, T = 5;
  for (auto [label, ctx] : test::native_and_gpu_contexts()) {
    BOOST_TEST_CONTEXT(label) {
      auto x = test::random_floats(size_t(T) * K, 11);
      for (uint32_t t = 0; t < T; ++t)
        for (uint32_t k = 0; k < K; ++k) x[size_t(t) * K + k] = x[size_t(t) * K + k] * (1.0f + t) + 0.7f * t;
      auto gamma = test::random_floats(K, 12, 0.5f, 1.5f), shift_host = test::random_floats(N, 13);
      auto row_gamma_host = test::random_floats(N, 14);
      Matrix W = Matrix::create(*ctx, DType::F16, N, K, "test weights");
      auto w = test::random_floats(size_t(N) * K, 15);
      W.write_rows(0, N, w.data(), DType::F32);
      auto dg = test::upload(*ctx, gamma), drg = test::upload(*ctx, row_gamma_host), dshift = test::upload(*ctx, shift_host);
      const ops::NormBefore ln{whole(dg), whole(drg), 1e-5f};
      auto product = [&](const std::vector<float>& rows, uint32_t n) {
        auto dx = test::upload(*ctx, rows);
        vk::Buffer dy(*ctx, uint64_t(n) * N * 4, vk::Memory::Device, "y");
        Graph g(*ctx);
        ops::linear_with(g, whole(dx), W, whole(dshift), whole(dy), n,
                         {.ep = {Activation::GeluTanh, false}, .norm_before = &ln});
        g.record();
        g.run();
        return test::download(dy, size_t(n) * N);
      };
      const std::vector<float> all = product(x, T);
      for (uint32_t t = 0; t < T; ++t) {
        const std::vector<float> xt(x.begin() + size_t(t) * K, x.begin() + size_t(t + 1) * K);
        const std::vector<float> alone = product(xt, 1);
        const std::vector<float> row(all.begin() + size_t(t) * N, all.begin() + size_t(t + 1) * N);
        BOOST_TEST((row == alone), "token " << t);
      }
    }
  }
}

// Where the fold cannot apply, the op says so instead of computing something else: K not a
// whole number of weight words, quantized weights, a kernel without the variant.
BOOST_AUTO_TEST_CASE(rejects_what_it_cannot_fold) {
  auto& ctx = test::gpu_paths_context();
  const uint32_t N = 64;
  auto make = [&](DType dt, uint32_t K) {
    Matrix W = Matrix::create(ctx, dt, N, K, "test weights");
    auto w = test::random_floats(size_t(N) * K, 1);
    W.write_rows(0, N, w.data(), DType::F32);
    return W;
  };
  vk::Buffer x(ctx, 4 * 100 * 4, vk::Memory::Device, "x"), y(ctx, 4 * N * 4, vk::Memory::Device, "y");
  vk::Buffer gamma(ctx, 100 * 4, vk::Memory::Device, "gamma"), row_gamma(ctx, N * 4, vk::Memory::Device, "W gamma");
  const ops::NormBefore ln{whole(gamma), whole(row_gamma), 1e-5f};
  const Matrix f16_96 = make(DType::F16, 96), f16_92 = make(DType::F16, 92), f32_92 = make(DType::F32, 92);
  const Matrix q8_96 = make(DType::Q8_0, 96);
  BOOST_TEST(ops::norm_before_fits(f16_96));
  BOOST_TEST(!ops::norm_before_fits(f16_92));  // 11.5 words of 8
  BOOST_TEST(ops::norm_before_fits(f32_92));   // 23 words of 4
  BOOST_TEST(!ops::norm_before_fits(q8_96));
  Graph g(ctx);
  auto fold = [&](const Matrix& W, uint32_t T, LinearKernel k) {
    ops::linear_with(g, whole(x), W, View{}, whole(y), T, {.kernel = k, .norm_before = &ln});
  };
  BOOST_CHECK_THROW(fold(f16_92, 1, LinearKernel::Auto), std::invalid_argument);
  BOOST_CHECK_THROW(fold(q8_96, 2, LinearKernel::Auto), std::invalid_argument);
  BOOST_CHECK_THROW(fold(f16_96, 1, LinearKernel::GemmTiled), DeviceError);
  BOOST_CHECK_THROW(fold(f16_96, 1, LinearKernel::MatVecTexel), DeviceError);
}

BOOST_AUTO_TEST_SUITE_END()
