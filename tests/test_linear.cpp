#include <algorithm>
#include <cmath>

#include "tests/reference/elementwise.hpp"
#include "tests/reference/linear.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "tests/support/linear_labels.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;
using test::describe_linear, test::kernel_name;

namespace {

// Tolerance, relative to the largest |reference| value of the output. The GPU sums K
// products in f32, the CPU reference in double from the same rounded weights. An f32 sum
// of K terms is off by at most about K * 2^-24 * sum|x w| (worst case, every rounding in
// the same direction); with x and w uniform in [-1, 1], sum|x w| ~ K / 4 and max |y| ~
// sqrt(K), so that bound is ~K^1.5 / 4 * 2^-24 relative (2.5e-3 at K = 3072). Roundings
// have random signs, though, so the expected error is ~sqrt(K) * 2^-24 relative (3e-6 at
// K = 3072; the largest seen over these tests is 2.2e-7). 1e-4 sits well above that and
// well below what any indexing bug gives: one dropped or doubled product (~0.25 against
// max |y| <= ~30) is 1e-2. GELU's erf approximation adds 1.2e-7 absolute at most.
constexpr double kTol = 1e-4;
// The cooperative-matrix GEMM rounds x to f16 before multiplying: 2^-11 relative per input,
// with random signs ~2^-12 * sqrt(K) * |x||w| on a sum of size ~sqrt(K) * |x||w|, i.e. a few
// 1e-4 of max |y|; 4e-3 leaves room for the worst output and stays below a dropped product.
constexpr double kCoopMatTol = 4e-3;

const LinearKernel kAllKernels[] = {LinearKernel::Auto,           LinearKernel::MatVec,
                                    LinearKernel::MatVecWide,     LinearKernel::MatVecTexel,
                                    LinearKernel::MatVecRows,     LinearKernel::MatVecRowsHeld,
                                    LinearKernel::MatVecCols,     LinearKernel::GemmRegisters,
                                    LinearKernel::GemmRegistersWide, LinearKernel::GemmTiled,
                                    LinearKernel::GemmCoopMat};
const DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16};

// Whether kernel k runs on this device when x has (x_view) or lacks a usable texel view:
// the rows mat-vec needs subgroups it can run on (the forced-fallback device has none, a
// GPU's are too wide) and x's view, which it can only use when K is a multiple of 4 (rows
// of whole texels); the held-x one also K <= kMaxHeldInputs in whole weight words, the
// column-split one (same needs) each lane's share of x within what it holds.
bool runs(vk::Context& ctx, LinearKernel k, bool x_view, uint32_t K, DType dt) {
  if (k == LinearKernel::GemmCoopMat) return ops::coopmat_available(ctx, dt);
  if (k == LinearKernel::MatVecRowsHeld && !ops::held_x_fits(K, dt)) return false;
  if (k == LinearKernel::MatVecCols && !ops::column_split_fits(ctx, K, dt)) return false;
  const bool rows =
      k == LinearKernel::MatVecRows || k == LinearKernel::MatVecRowsHeld || k == LinearKernel::MatVecCols;
  return !rows || (ops::row_matvec_supported(ctx) && x_view);
}

// Kernel k's tolerance for T tokens of f16 weights (Auto takes the cooperative-matrix GEMM
// for prompts where the device has it).
double tol(vk::Context& ctx, LinearKernel k, DType dt, uint32_t T, uint32_t N) {
  const bool coop = k == LinearKernel::GemmCoopMat ||
                    (k == LinearKernel::Auto && T > 1 && ops::coopmat_available(ctx, dt) && ops::coopmat_tiles(ctx, T));
  return coop ? kCoopMatTol : kTol;
}

enum class Residual { None, Separate, InPlace };

// Random weights on the device, and the same values rounded to the storage dtype on the
// host (what the reference must use).
struct TestMatrix {
  Matrix m;
  std::vector<float> rounded;
};

TestMatrix make_matrix_from(vk::Context& ctx, DType dtype, uint32_t rows, uint32_t cols, const std::vector<float>& w,
                            uint64_t max_chunk_bytes = 0) {
  TestMatrix t;
  t.m = Matrix::create(ctx, dtype, rows, cols, "test weights", max_chunk_bytes);
  t.m.write_rows(0, rows, w.data(), DType::F32);
  t.rounded = test::rounded_to(w, dtype);
  return t;
}

TestMatrix make_matrix(vk::Context& ctx, DType dtype, uint32_t rows, uint32_t cols, uint32_t seed,
                       uint64_t max_chunk_bytes = 0) {
  return make_matrix_from(ctx, dtype, rows, cols, test::random_floats(size_t(rows) * cols, seed), max_chunk_bytes);
}

struct Inputs {
  std::vector<float> x, bias, r;  // bias / r empty when unused
};

Inputs make_inputs(uint32_t T, uint32_t K, uint32_t N, bool bias, bool residual, uint32_t seed) {
  Inputs in;
  in.x = test::random_floats(size_t(T) * K, seed);
  if (bias) in.bias = test::random_floats(N, seed + 1);
  if (residual) in.r = test::random_floats(size_t(T) * N, seed + 2);
  return in;
}

std::vector<float> reference(const Inputs& in, const TestMatrix& w, uint32_t T, Activation act) {
  std::vector<float> y(size_t(T) * w.m.rows);
  cpu::linear(in.x, w.rounded, in.bias, in.r, y, T, w.m.cols, w.m.rows, act);
  return y;
}

// Runs the op on the device and returns y. x gets a texel view (CPU kernels read it through
// one) when x_view and the device allows it.
std::vector<float> run_gpu(vk::Context& ctx, LinearKernel kernel, const TestMatrix& w, const Inputs& in, uint32_t T,
                           Activation act, Residual res, bool x_view = true) {
  const uint32_t N = w.m.rows;
  auto dx = test::upload(ctx, in.x);
  if (x_view) dx.try_create_texel_view();
  vk::Buffer dy(ctx, uint64_t(T) * N * 4, vk::Memory::Device, "test y");
  vk::Buffer db, dr;
  View bias{}, r{};
  if (!in.bias.empty()) {
    db = test::upload(ctx, in.bias);
    bias = whole(db);
  }
  if (res == Residual::Separate) {
    dr = test::upload(ctx, in.r);
    r = whole(dr);
  } else if (res == Residual::InPlace) {
    dy.upload(in.r.data(), in.r.size() * 4);
    r = whole(dy);
  }
  Graph g(ctx);
  ops::linear_with(g, whole(dx), w.m, bias, whole(dy), T,
                   {.kernel = kernel, .ep = {act, res != Residual::None}, .r = r});
  g.record();
  g.run();
  return test::download(dy, size_t(T) * N);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(linear, test::NoValidationMessages)

// Every kernel with every dtype, on odd and even shapes, T == 1 and T > 1, with a bias;
// x with a texel view on even shapes, without on odd ones (CPU kernels read x either way).
// Each (kernel, dtype, K) is a pipeline to compile (0.1-0.5 s on lavapipe), so the dtypes
// rotate over the kernels from shape to shape (a Latin square) instead of crossing them:
// over the first three shapes every kernel meets every dtype.
BOOST_AUTO_TEST_CASE(all_kernels_and_dtypes_match_cpu) {
  struct Shape {
    uint32_t K, N;
    std::vector<uint32_t> tokens;
  };
  const Shape shapes[] = {
      {7, 13, {1, 3}},        // K < one weight word, not a multiple of 4: scalar x, tail word
      {96, 770, {1, 70}},     // whole words; outputs not a multiple of any tile
      {1013, 96, {1, 129}},   // odd K: tail word; T past a 128-token tile
      {3072, 40, {1, 3}},     // GPT-2's MLP input width
      {64, 50257, {1}},       // GPT-2's vocabulary as outputs
  };
  for (auto [label, ctx] : test::all_contexts())
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const bool x_view = si % 2 == 0;
      for (size_t ki = 0; ki < std::size(kAllKernels); ++ki) {
        const LinearKernel k = kAllKernels[ki];
        const DType dt = kAllDTypes[(si + ki) % std::size(kAllDTypes)];
        if (!runs(*ctx, k, x_view && s.K % 4 == 0, s.K, dt)) continue;
        auto w = make_matrix(*ctx, dt, s.N, s.K, s.K * 31 + s.N);
        for (uint32_t T : s.tokens) {
          auto in = make_inputs(T, s.K, s.N, true, false, T + s.K);
          auto got = run_gpu(*ctx, k, w, in, T, Activation::None, Residual::None, x_view);
          BOOST_TEST(test::max_rel_error(got, reference(in, w, T, Activation::None)) <= tol(*ctx, k, dt, T, s.N),
                     describe_linear(label, k, dt, T, s.K, s.N) << " x_view=" << x_view);
        }
      }
    }
}

// The CPU GEMM takes two tiles for 16-bit weights: 8 tokens x 4 outputs per invocation
// (GemmRegisters), and 16 x 3 (GemmRegistersWide), which Auto picks from
// ops::kWideTileMinTokens. Both tiles on both sides of the threshold, a partial last tile of
// tokens and of outputs (70 is a multiple of neither 24 nor 32), x with and without a texel
// view, and the fused epilogue (bias, GELU, residual in place); and one token through the
// wide tile (a prompt's last row, GptModel::build_graph). Elsewhere (the fallback device,
// GPUs) both are one plain register tile, which the other cases cover: each pipeline here
// is a lavapipe compile of ~1 s.
BOOST_AUTO_TEST_CASE(gemm_tiles_either_side_of_the_wide_tile_threshold) {
  const uint32_t N = 70;
  const uint32_t Ts[] = {1, ops::kWideTileMinTokens - 1, ops::kWideTileMinTokens, ops::kWideTileMinTokens + 13};
  for (auto [label, ctx] : test::all_contexts()) {
    if (!ops::broadcast_gemm_supported(*ctx)) {
      BOOST_TEST_MESSAGE(label << ": one register tile on " << ctx->info().name);
      continue;
    }
    for (DType dt : {DType::F16, DType::BF16})
      for (uint32_t K : {96u, 99u}) {
        auto w = make_matrix(*ctx, dt, N, K, K + static_cast<uint32_t>(dt));
        for (uint32_t T : Ts)
          for (LinearKernel k : {LinearKernel::GemmRegisters, LinearKernel::GemmRegistersWide}) {
            const bool epilogue = T == Ts[3];
            auto in = make_inputs(T, K, N, epilogue, epilogue, T * K);
            const Activation act = epilogue ? Activation::GeluTanh : Activation::None;
            auto got = run_gpu(*ctx, k, w, in, T, act, epilogue ? Residual::InPlace : Residual::None, K % 4 == 0);
            BOOST_TEST(test::max_rel_error(got, reference(in, w, T, act)) <= kTol,
                       describe_linear(label, k, dt, T, K, N) << " epilogue=" << epilogue);
          }
      }
  }
  auto& ctx = test::context();
  if (!ctx.cpu_kernels()) return;  // GPUs take the tiled GEMM
  auto w = make_matrix(ctx, DType::F16, N, 96, 1);
  vk::Buffer x(ctx, uint64_t(ops::kWideTileMinTokens) * 96 * 4, vk::Memory::Device, "x");
  BOOST_TEST((ops::auto_kernel(ctx, ops::kWideTileMinTokens - 1, w.m, whole(x)) == LinearKernel::GemmRegisters));
  BOOST_TEST((ops::auto_kernel(ctx, ops::kWideTileMinTokens, w.m, whole(x)) == LinearKernel::GemmRegistersWide));
}

// A GPU's tiled GEMM of few tiles splits its inputs (split-K: partial sums in the graph's
// scratch, then split_sum with the epilogue): 2 to 8 splits, K a multiple of 4 or not (the
// last split short), every dtype, each residual mode, on the GPU paths (GPTVK_FORCE=gpu).
BOOST_AUTO_TEST_CASE(gpu_gemm_split_over_k_matches_cpu) {
  auto& ctx = test::gpu_paths_context();
  const uint64_t messages = ctx.validation_messages();
  struct Shape {
    uint32_t T, K, N;
    DType dt;
    Residual res;
  };
  const Shape shapes[] = {{16, 1600, 96, DType::F16, Residual::None},
                          {70, 301, 50, DType::F32, Residual::InPlace},
                          {5, 1024, 70, DType::BF16, Residual::Separate}};
  for (const Shape& sh : shapes) {
    auto w = make_matrix(ctx, sh.dt, sh.N, sh.K, sh.K);
    auto in = make_inputs(sh.T, sh.K, sh.N, true, sh.res != Residual::None, sh.T + sh.K);
    Graph probe(ctx);
    vk::Buffer x(ctx, uint64_t(sh.T) * sh.K * 4), y(ctx, uint64_t(sh.T) * sh.N * 4);
    ops::linear_with(probe, whole(x), w.m, View{}, whole(y), sh.T, {.kernel = LinearKernel::GemmTiled});
    const std::string what = describe_linear("gpu paths", LinearKernel::GemmTiled, sh.dt, sh.T, sh.K, sh.N);
    BOOST_TEST(probe.size() == 2u, what << ": split over K");
    auto got = run_gpu(ctx, LinearKernel::GemmTiled, w, in, sh.T, Activation::GeluTanh, sh.res, false);
    BOOST_TEST(test::max_rel_error(got, reference(in, w, sh.T, Activation::GeluTanh)) <= kTol, what);
  }
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

// Bias on and off, each activation, the residual separate and in place (r == y), on every
// kernel (the epilogue is one function, so its features need not be crossed with each other,
// nor every epilogue with every kernel: they alternate, and each kernel meets two or three).
// K is whole 16-byte words of f16 weights: lavapipe takes 2-4x as long to compile a kernel
// whose rows end in a part word (the other cases cover those).
BOOST_AUTO_TEST_CASE(fused_epilogues_match_cpu) {
  const uint32_t K = 96, N = 70;
  struct Epilogue {
    bool bias;
    Activation act;
    Residual res;
  };
  // Each activation once, bias on and off, each residual mode.
  const Epilogue epilogues[] = {{true, Activation::None, Residual::Separate},
                                {false, Activation::GeluTanh, Residual::InPlace},
                                {true, Activation::GeluErf, Residual::None},
                                {true, Activation::Relu, Residual::InPlace},
                                {false, Activation::None, Residual::None}};
  for (auto [label, ctx] : test::all_contexts()) {
    auto w = make_matrix(*ctx, DType::F16, N, K, 5);
    for (uint32_t T : {1u, 5u})
      for (size_t ei = 0; ei < std::size(epilogues); ++ei) {
        const Epilogue& e = epilogues[ei];
        auto in = make_inputs(T, K, N, e.bias, e.res != Residual::None, 11 * T + static_cast<uint32_t>(e.act));
        auto want = reference(in, w, T, e.act);
        for (size_t ki = 0; ki < std::size(kAllKernels); ++ki) {
          const LinearKernel k = kAllKernels[ki];
          if ((ki + ei) % 2 || !runs(*ctx, k, true, K, DType::F16)) continue;
          auto got = run_gpu(*ctx, k, w, in, T, e.act, e.res);
          BOOST_TEST(test::max_rel_error(got, want) <= tol(*ctx, k, DType::F16, T, N),
                     describe_linear(label, k, DType::F16, T, K, N)
                         << " bias=" << e.bias << " act=" << static_cast<int>(e.act)
                         << " residual=" << static_cast<int>(e.res));
        }
      }
  }
}

// f16 rows are stored scaled by a power of two chosen per row (engine/f16_rows.hpp), and
// the CPU kernels decode them with integer operations and scaled inputs: rows of f16
// subnormals only, of values up to 60000 (no scaling, subnormals kept), zeros and ordinary
// rows, with inputs over six decades, must match the reference row by row on every kernel
// (each row's error relative to that row's largest output, so small rows count too).
BOOST_AUTO_TEST_CASE(f16_rows_of_any_magnitude_match_cpu) {
  const uint32_t K = 200, N = 70;
  const float magnitude[] = {1.0f, 1e-5f, 3e-7f, 60000.0f, 200.0f, 0.0f, 1e-3f};
  auto wv = test::random_floats(size_t(N) * K, 77);
  for (uint32_t o = 0; o < N; ++o)
    for (uint32_t c = 0; c < K; ++c) {
      float& v = wv[size_t(o) * K + c];
      v *= magnitude[o % std::size(magnitude)];
      if (o % std::size(magnitude) == 3 && c % 5 == 0) v *= 1e-10f;  // subnormals beside 60000
    }
  for (auto [label, ctx] : test::all_contexts()) {
    auto w = make_matrix_from(*ctx, DType::F16, N, K, wv);
    // The stored rows read back as the f16 weights themselves (scaling undone exactly).
    BOOST_TEST(w.m.read_rows_f32(0, N) == w.rounded, label << " read back");
    for (uint32_t T : {1u, 9u}) {
      auto in = make_inputs(T, K, N, false, false, T);
      for (size_t i = 0; i < in.x.size(); ++i) in.x[i] *= std::pow(10.0f, float(int(i % 7) - 3));  // 1e-3 .. 1e3
      // The cooperative-matrix GEMM rounds x to f16: over six decades with cancelling sums,
      // a row's error reaches ~1e-2 of its largest output, so it is held to x rounded the same way.
      auto in_f16 = in;
      in_f16.x = test::rounded_to(in.x, DType::F16);
      const auto want = reference(in, w, T, Activation::None), want_f16 = reference(in_f16, w, T, Activation::None);
      for (LinearKernel k : kAllKernels) {
        if (!runs(*ctx, k, true, K, DType::F16)) continue;
        const auto got = run_gpu(*ctx, k, w, in, T, Activation::None, Residual::None);
        const bool coop = tol(*ctx, k, DType::F16, T, N) == kCoopMatTol;
        double worst = 0;
        for (uint32_t o = 0; o < N; ++o) {
          double row_max = 0, err = 0;
          const auto& ref = coop ? want_f16 : want;
          for (uint32_t t = 0; t < T; ++t) row_max = std::max(row_max, std::fabs(double(ref[size_t(t) * N + o])));
          for (uint32_t t = 0; t < T; ++t)
            err = std::max(err, std::fabs(double(got[size_t(t) * N + o]) - ref[size_t(t) * N + o]));
          worst = std::max(worst, row_max > 0 ? err / row_max : err);  // the zero rows: exactly 0
        }
        BOOST_TEST(worst <= kTol, describe_linear(label, k, DType::F16, T, K, N) << " worst row error " << worst);
      }
    }
  }
}

// A LayerNorm of the output after the residual add (ops::NormAfter): fused into the
// mat-vec for one token on CPU devices (its last workgroup normalises the row), a separate
// dispatch otherwise. Both y and the normalised row must match the reference, on every
// kernel, for one and several tokens, with the norm writing a separate buffer (pre-norm
// GPT-2) or the residual's own buffer (post-norm GPT-1: out == r); the graph runs twice,
// so a counter the fused kernel failed to reset would show in the second run.
BOOST_AUTO_TEST_CASE(layernorm_after_matches_cpu) {
  const uint32_t K = 96, N = 200;
  const float eps = 1e-5f;
  auto gamma = test::random_floats(N, 5, 0.5f, 1.5f), beta = test::random_floats(N, 6);
  for (auto [label, ctx] : test::all_contexts()) {
    auto w = make_matrix(*ctx, DType::F16, N, K, 41);
    auto dg = test::upload(*ctx, gamma), db = test::upload(*ctx, beta);
    vk::Buffer counter(*ctx, 4, vk::Memory::Device, "counter");
    counter.fill_zero();
    for (LinearKernel k : kAllKernels) {
      if (!runs(*ctx, k, true, K, DType::F16)) continue;
      for (uint32_t T : {1u, 3u})
        for (bool out_is_r : {false, true}) {
          auto in = make_inputs(T, K, N, true, true, T + 7);
          // Reference: y = r + x W^T + b, then out = LayerNorm(y).
          const auto want_y = reference(in, w, T, Activation::None);
          std::vector<float> want_out(want_y.size());
          cpu::layernorm(want_y.data(), gamma.data(), beta.data(), want_out.data(), T, N, eps);

          auto dx = test::upload(*ctx, in.x);
          dx.try_create_texel_view();
          auto dr = test::upload(*ctx, in.r), dbias = test::upload(*ctx, in.bias);
          vk::Buffer dy(*ctx, uint64_t(T) * N * 4, vk::Memory::Device, "y");
          vk::Buffer dout(*ctx, uint64_t(T) * N * 4, vk::Memory::Device, "out");
          const View out = out_is_r ? whole(dr) : whole(dout);
          const ops::NormAfter norm{whole(dg), whole(db), out, whole(counter), eps, "ln"};
          Graph g(*ctx);
          ops::linear_with(g, whole(dx), w.m, whole(dbias), whole(dy), T,
                           {.kernel = k, .ep = {Activation::None, true}, .r = whole(dr), .norm_after = &norm});
          g.record();
          for (int run = 0; run < 2; ++run) {
            if (out_is_r) dr.upload(in.r.data(), in.r.size() * 4);  // the norm overwrote r
            g.run();
            const std::string what = describe_linear(label, k, DType::F16, T, K, N) + " out_is_r=" +
                                     std::to_string(out_is_r) + " run=" + std::to_string(run);
            BOOST_TEST(test::max_rel_error(test::download(dy, want_y.size()), want_y) <= tol(*ctx, k, DType::F16, T, N), what << " y");
            const auto& got_out = out_is_r ? dr : dout;
            BOOST_TEST(test::max_rel_error(test::download(got_out, want_out.size()), want_out) <= tol(*ctx, k, DType::F16, T, N), what << " norm");
          }
        }
    }
    std::vector<uint32_t> left(1);
    counter.download(left.data(), 4);
    BOOST_TEST(left[0] == 0u, label << ": the fused kernels leave their counter at 0");
  }
}

// W split into row chunks (one dispatch each, writing its own output columns); each
// kernel with another dtype and residual mode.
BOOST_AUTO_TEST_CASE(chunked_weights_match_cpu) {
  const uint32_t K = 96, N = 770;
  for (auto [label, ctx] : test::all_contexts())
    for (size_t ki = 0; ki < std::size(kAllKernels); ++ki) {
      const LinearKernel k = kAllKernels[ki];
      const DType dt = kAllDTypes[ki % std::size(kAllDTypes)];
      if (!runs(*ctx, k, true, K, dt)) continue;
      const Residual res = ki % 2 ? Residual::InPlace : Residual::Separate;
      // 3 blocks of 64 rows per chunk: chunks of 192 rows, the last one 2 rows.
      const uint64_t row_bytes = uint64_t(K) * dtype_bytes(dt);
      auto w = make_matrix(*ctx, dt, N, K, 17, 3 * kChunkRowAlign * row_bytes);
      BOOST_TEST_REQUIRE(w.m.chunks.size() == 5u);
      for (uint32_t T : {1u, 70u}) {
        auto in = make_inputs(T, K, N, true, true, T);
        auto got = run_gpu(*ctx, k, w, in, T, Activation::GeluTanh, res);
        BOOST_TEST(test::max_rel_error(got, reference(in, w, T, Activation::GeluTanh)) <= tol(*ctx, k, dt, T, N),
                   describe_linear(label, k, dt, T, K, N) << " chunks=5 residual=" << static_cast<int>(res));
      }
    }
}

// Outputs too large for one binding: y = [400][50257] f32 is 80 MB, over the fallback
// context's 64 MiB range, so the op splits T; W is chunked too.
BOOST_AUTO_TEST_CASE(token_split_over_binding_range) {
  auto& ctx = test::fallback_context();
  const uint32_t T = 400, K = 8, N = 50257;
  BOOST_TEST_REQUIRE(uint64_t(T) * N * 4 > ctx.caps().max_storage_buffer_range);
  auto w = make_matrix(ctx, DType::BF16, N, K, 23, 16384 * 16);  // 16384 rows (16 bytes each) per chunk
  BOOST_TEST_REQUIRE(w.m.chunks.size() == 4u);
  auto in = make_inputs(T, K, N, true, true, 29);
  auto want = reference(in, w, T, Activation::Relu);
  for (LinearKernel k : {LinearKernel::Auto, LinearKernel::GemmTiled}) {
    auto got = run_gpu(ctx, k, w, in, T, Activation::Relu, Residual::InPlace);
    BOOST_TEST(test::max_rel_error(got, want) <= kTol, describe_linear("fallback", k, DType::BF16, T, K, N));
  }
}

// Inputs too large for one binding: x = [300][65536] f32 is 75 MB.
BOOST_AUTO_TEST_CASE(token_split_over_binding_range_of_x) {
  auto& ctx = test::fallback_context();
  const uint32_t T = 300, K = 65536, N = 8;
  BOOST_TEST_REQUIRE(uint64_t(T) * K * 4 > ctx.caps().max_storage_buffer_range);
  auto w = make_matrix(ctx, DType::F16, N, K, 31);
  auto in = make_inputs(T, K, N, false, false, 37);
  auto want = reference(in, w, T, Activation::None);
  for (LinearKernel k : {LinearKernel::Auto, LinearKernel::MatVec, LinearKernel::MatVecTexel}) {
    auto got = run_gpu(ctx, k, w, in, T, Activation::None, Residual::None);
    BOOST_TEST(test::max_rel_error(got, want) <= kTol, describe_linear("fallback", k, DType::F16, T, K, N));
  }
}

// More outputs than one dispatch's 65535 workgroups cover (16 rows each for the split-K
// texel mat-vec, 32 for the rows mat-vec): the second dispatch starts inside the chunk's
// texel view, at texel w_base.
BOOST_AUTO_TEST_CASE(texel_matvec_output_blocks) {
  auto& ctx = test::context();
  const uint32_t K = 8, N = 65535 * 32 + 1000;
  auto w = make_matrix(ctx, DType::BF16, N, K, 41);
  BOOST_TEST_REQUIRE(w.m.chunks.size() == 1u);
  auto in = make_inputs(1, K, N, true, false, 43);
  const auto want = reference(in, w, 1, Activation::None);
  size_t ran = 0;
  for (LinearKernel k :
       {LinearKernel::MatVecTexel, LinearKernel::MatVecRows, LinearKernel::MatVecRowsHeld, LinearKernel::MatVecCols}) {
    if (!runs(ctx, k, true, K, DType::BF16)) {
      BOOST_TEST_MESSAGE(kernel_name(k) << ": not on this device, skipped");
      continue;
    }
    auto got = run_gpu(ctx, k, w, in, 1, Activation::None, Residual::None);
    BOOST_TEST(test::max_rel_error(got, want) <= kTol, kernel_name(k));
    ++ran;
  }
  if (ran == 0) BOOST_TEST_MESSAGE("no texel mat-vec on this device: nothing to check");
}

// The mat-vecs that hold x at the edges of what they take, then one word past: there
// Auto still runs (a streaming kernel) and forcing the holding one is refused.
// Held-x row mat-vec: x of fewer texels than one workgroup's lanes (K = 24: 6 texels),
// whole blocks then a partial one (K = 296: 74 texels), and kMaxHeldInputs itself.
// Column split (LOCAL lanes to a row, LOCAL = subgroup size): fewer words than lanes
// (K = 24), whole rounds of LOCAL words then a partial one (K = 232 in f16: 29 words),
// a row ending in a half word (K = 2052, 16-bit weights), and the largest K it holds.
BOOST_AUTO_TEST_CASE(held_x_matvec_edges) {
  auto& ctx = test::context();
  const uint32_t cols_max = 4 * ops::kMaxColumnSplitTexels * ctx.caps().subgroup_size;
  const struct {
    LinearKernel k;
    std::vector<uint32_t> Ks;
  } cases[] = {{LinearKernel::MatVecRowsHeld, {24u, 40u + 8u * 8u * 4u, ops::kMaxHeldInputs}},
               {LinearKernel::MatVecCols, {24u, 232u, 2052u, cols_max}}};
  const uint32_t N = 37;
  size_t di = 0;
  for (const auto& c : cases) {
    if (!runs(ctx, c.k, true, 8, DType::F16)) continue;  // no such kernel on this device
    for (uint32_t K : c.Ks)
      for (uint32_t T : {1u, 2u}) {
        const DType dt = kAllDTypes[di++ % std::size(kAllDTypes)];
        auto w = make_matrix(ctx, dt, N, K, K + T);
        auto in = make_inputs(T, K, N, true, true, K * T);
        auto got = run_gpu(ctx, c.k, w, in, T, Activation::None, Residual::Separate);
        BOOST_TEST(test::max_rel_error(got, reference(in, w, T, Activation::None)) <= kTol,
                   describe_linear("edge", c.k, dt, T, K, N));
      }
    const uint32_t K = c.Ks.back() + 8;
    auto w = make_matrix(ctx, DType::F16, N, K, 3);
    auto in = make_inputs(1, K, N, false, false, 5);
    BOOST_CHECK_THROW(run_gpu(ctx, c.k, w, in, 1, Activation::None, Residual::None), std::invalid_argument);
    BOOST_TEST(test::max_rel_error(run_gpu(ctx, LinearKernel::Auto, w, in, 1, Activation::None, Residual::None),
                                   reference(in, w, 1, Activation::None)) <= kTol);
  }
}

// Declared accesses drive the barriers: in-place residual layers chain with a barrier
// between them, decode chunks write disjoint columns and need none.
BOOST_AUTO_TEST_CASE(barriers_follow_declared_accesses) {
  auto& ctx = test::context();
  const uint32_t K = 64, N = 64;
  auto w = make_matrix(ctx, DType::F32, N, K, 41);
  auto x = test::random_floats(K, 43);
  auto dx = test::upload(ctx, x);
  {
    // h = W x; z = W h; z += W h (in-place residual): each step reads what the one
    // before wrote, so two barriers.
    Graph g(ctx);
    vk::Buffer h(ctx, N * 4), z(ctx, N * 4);
    ops::linear(g, whole(dx), w.m, {}, whole(h), 1);
    ops::linear(g, whole(h), w.m, {}, whole(z), 1);
    ops::linear(g, whole(h), w.m, {}, whole(z), 1, {Activation::None, true}, whole(z));
    g.record();
    BOOST_TEST(g.barrier_count() == 2u);
    g.run();
    std::vector<float> hv(N), zv(N);
    cpu::linear(x, w.rounded, {}, {}, hv, 1, K, N, Activation::None);
    cpu::linear(hv, w.rounded, {}, {}, zv, 1, K, N, Activation::None);
    cpu::linear(hv, w.rounded, {}, zv, zv, 1, K, N, Activation::None);
    BOOST_TEST(test::max_rel_error(test::download(z, N), zv) <= kTol);
  }
  auto chunked = make_matrix(ctx, DType::F32, 256, K, 47, kChunkRowAlign * K * 4);  // 4 chunks
  Graph g(ctx);
  vk::Buffer y(ctx, 256 * 4);
  ops::linear(g, whole(dx), chunked.m, {}, whole(y), 1);
  g.record();
  BOOST_TEST(g.size() == 4u);
  BOOST_TEST(g.barrier_count() == 0u);
  g.run();
  std::vector<float> want(256);
  cpu::linear(x, chunked.rounded, {}, {}, want, 1, K, 256, Activation::None);
  BOOST_TEST(test::max_rel_error(test::download(y, 256), want) <= kTol);
}

// Arguments the kernels cannot honour are refused instead of racing.
BOOST_AUTO_TEST_CASE(rejects_overlapping_and_short_views) {
  auto& ctx = test::context();
  auto w = make_matrix(ctx, DType::F32, 16, 16, 53);
  vk::Buffer a(ctx, 64 * 4), b(ctx, 64 * 4);
  Graph g(ctx);
  const ops::LinearEpilogue res{Activation::None, true};
  BOOST_CHECK_THROW(ops::linear(g, whole(a), w.m, {}, whole(a), 1), std::invalid_argument);  // x is y
  BOOST_CHECK_THROW(ops::linear(g, whole(a), w.m, {}, View{&b, 0, 15 * 4}, 1), std::invalid_argument);  // short y
  BOOST_CHECK_THROW(ops::linear(g, whole(a), w.m, {}, View{&b, 0, 64}, 1, res, View{&b, 16, 64}),
                    std::invalid_argument);  // r partly overlaps y
  BOOST_TEST(g.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
