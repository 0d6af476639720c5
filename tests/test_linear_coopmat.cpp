// The linear layer's GEMM on matrix units (ops::LinearKernel::GemmCoopMat): on shapes that
// are no multiple of any tile (T, K and N odd), both tiles (2 and 4 accumulators per
// subgroup), K not a multiple of 4 (scalar x loads), split-K, every epilogue, and W in each
// dtype it takes (f16; bf16, Q8_0 and Q4_0 turned into f16 as they are staged). The kernel
// rounds x and the weights to f16, so the reference multiplies x and the matrix's own values
// (dequantized) rounded the same way: then only the order of the f32 sums differs, and the
// tolerance is the f32 kernels' (tests/test_linear.cpp, kTol). On devices
// without cooperative matrices (lavapipe) the device's own cases are skipped, saying why,
// and the same cases run on emulated ones (GPTVK_FORCE=gpu,coopmat_emu), which test the
// kernel's tiles, staging, split-K and epilogues there.
#include <optional>
#include <sstream>
#include <utility>

#include "engine/dtype.hpp"
#include "engine/error.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/linear_coopmat.hpp"
#include "tests/reference/linear.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using namespace gptvk::ops;

namespace {

constexpr double kTol = 1e-4;

const auto has_matrix_units = [](vk::Context& c) { return ops::coopmat_available(c, DType::F16); };
const char* const kNoMatrixUnits = "has no cooperative matrices for f16 (or this build no such shader)";

struct Case {
  uint32_t T, K, N;
  bool bias;
  Activation act;
  int residual;  // 0 none, 1 separate, 2 in place
  const char* why;
  DType dtype = DType::F16;
};

void check(vk::Context& ctx, const Case& c, const CoopMatTiles* tiles = nullptr) {
  auto wv = test::random_floats(size_t(c.N) * c.K, c.K + c.N);
  Matrix W = Matrix::create(ctx, c.dtype, c.N, c.K, "w");
  W.write_rows(0, c.N, wv.data(), DType::F32);
  const auto x = test::random_floats(size_t(c.T) * c.K, c.T * 7 + c.K, -2.0f, 2.0f);
  const auto bias = c.bias ? test::random_floats(c.N, 3) : std::vector<float>{};
  const auto r = c.residual ? test::random_floats(size_t(c.T) * c.N, 5) : std::vector<float>{};
  std::vector<float> want(size_t(c.T) * c.N);
  const std::vector<float> stored = W.read_rows_f32(0, c.N);  // the weights as the matrix holds them
  cpu::linear(test::rounded_to(x, DType::F16), test::rounded_to(stored, DType::F16), bias, r, want, c.T, c.K, c.N, c.act);

  auto dx = test::upload(ctx, x);
  vk::Buffer dy(ctx, uint64_t(c.T) * c.N * 4, vk::Memory::Device, "y"), db, dr;
  View vb{}, vr{};
  if (c.bias) vb = whole(db = test::upload(ctx, bias));
  if (c.residual == 1) vr = whole(dr = test::upload(ctx, r));
  if (c.residual == 2) {
    dy.upload(r.data(), r.size() * 4);
    vr = whole(dy);
  }
  Graph g(ctx);
  ops::linear_with(g, whole(dx), W, vb, whole(dy), c.T,
                   {.kernel = ops::LinearKernel::GemmCoopMat, .ep = {c.act, c.residual != 0}, .r = vr, .coopmat_tiles = tiles});
  g.record();
  g.run();
  std::ostringstream what;
  what << c.why << ": " << dtype_name(c.dtype) << " T=" << c.T << " K=" << c.K << " N=" << c.N << " ("
       << g.size() << " dispatches";
  if (tiles) what << ", " << tiles->cm << "x" << tiles->cn << "x" << tiles->ck << " matrices";
  what << ")";
  BOOST_TEST(test::max_rel_error(test::download(dy, want.size()), want) <= kTol, what.str());
}

const Case kOddShapes[] = {
      {3, 100, 70, true, Activation::None, 0, "a batch of decode rows (2 accumulators a subgroup)"},
      {13, 1600, 96, false, Activation::GeluTanh, 1, "a batch, split over K"},
      {70, 301, 50, true, Activation::GeluErf, 2, "K not a multiple of 4 (scalar x), partial last word"},
      {130, 768, 2304, true, Activation::None, 0, "4 accumulators a subgroup, partial last tile of tokens"},
      {129, 1024, 770, true, Activation::Relu, 1, "outputs not a multiple of any tile"},
      {520, 64, 4800, false, Activation::GeluTanh, 2, "many tiles"},
      {16, 3072, 768, true, Activation::None, 2, "GPT-2 small's fc-proj for 16 rows, split over K"},
};

// W in the other dtypes (Q8_0 / Q4_0 rows are whole blocks of 32 inputs).
const Case kOtherDTypes[] = {
      {70, 301, 50, true, Activation::GeluErf, 2, "bf16, scalar x, partial last word", DType::BF16},
      {13, 1600, 96, false, Activation::GeluTanh, 1, "q8_0, split over K", DType::Q8_0},
      {129, 320, 770, true, Activation::Relu, 1, "q8_0, outputs not a multiple of any tile", DType::Q8_0},
      {70, 96, 50, true, Activation::None, 2, "q4_0, partial last tile of tokens", DType::Q4_0},
};

void check_odd_shapes(vk::Context& ctx) {
  const uint64_t messages = ctx.validation_messages();
  BOOST_TEST_MESSAGE(ctx.info().name << ": " << ctx.caps().coopmat.describe());
  for (const Case& c : kOddShapes) check(ctx, c);
  for (const Case& c : kOtherDTypes) check(ctx, c);
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

}  // namespace

BOOST_AUTO_TEST_CASE(coopmat_gemm_matches_cpu_on_odd_shapes, *test::device_has(has_matrix_units, kNoMatrixUnits)) {
  check_odd_shapes(test::context());
}

// On emulated matrices: four of the cases above in the tiles a device would get (16x8x8),
// then one in each of the H100's other two shapes, whose indexing differs. Fewer than on a
// device: lavapipe takes about a second to compile each case's pipeline.
BOOST_AUTO_TEST_CASE(emulated_coopmat_gemm_matches_cpu_on_odd_shapes,
                     *test::device_has(test::can_emulate_coopmat, test::kCannotEmulateCoopmat)) {
  auto& ctx = test::coopmat_emu_context();
  BOOST_TEST_REQUIRE(ops::coopmat_available(ctx, DType::F16));
  BOOST_TEST_MESSAGE(ctx.info().name << ": " << ctx.caps().coopmat.describe());
  const uint64_t messages = ctx.validation_messages();
  for (const Case& c : {kOddShapes[0], kOddShapes[1], kOddShapes[2], kOddShapes[4]}) check(ctx, c);
  for (const Case& c : kOtherDTypes) check(ctx, c);
  const std::pair<vk::CoopMatShape, Case> other_shapes[] = {
      {{16, 16, 16}, kOddShapes[2]}, {{16, 8, 16}, kOddShapes[4]}, {{16, 16, 16}, kOtherDTypes[1]}};
  for (const auto& [shape, c] : other_shapes) {
    // The device's accumulators per subgroup (2 or 4), or half that where they overflow
    // lavapipe's 32 KiB of shared memory.
    std::optional<CoopMatTiles> tiles;
    for (uint32_t tn = c.T <= shape.m ? 2 : 4; tn >= 1 && !tiles; tn /= 2) tiles = ops::coopmat_tiles_of(ctx, shape, 1, 4, 1, tn);
    BOOST_TEST_REQUIRE(tiles.has_value());
    check(ctx, c, &*tiles);
  }
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

namespace {

// The plan's choice: prompts over f16, bf16, Q8_0 and Q4_0 weights take the matrix units
// where the device has them (or emulates them); f32 weights, a bf16 matrix with a value past
// f16's range, and single tokens keep the other kernels.
void check_auto_picks(vk::Context& ctx) {
  vk::Buffer x(ctx, 64 * 768 * 4, vk::Memory::Device, "x");
  for (DType dt : {DType::F16, DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    Matrix W = Matrix::create(ctx, dt, 768, 768, "w");
    const bool coop = dt != DType::F32;
    BOOST_TEST((ops::auto_kernel(ctx, 64, W, whole(x)) == ops::LinearKernel::GemmCoopMat) == coop, dtype_name(dt));
    BOOST_TEST((ops::auto_kernel(ctx, 1, W, whole(x)) == ops::LinearKernel::MatVec), dtype_name(dt));
  }
  std::vector<float> row(768, 0.5f);
  row[100] = 70000.0f;  // f16's largest is 65504
  Matrix wide = Matrix::create(ctx, DType::BF16, 768, 768, "w");
  wide.write_rows(0, 1, row.data(), DType::F32);
  BOOST_TEST(wide.outside_f16);
  BOOST_TEST((ops::auto_kernel(ctx, 64, wide, whole(x)) == ops::LinearKernel::GemmTiled));
  vk::Buffer y(ctx, 64 * 768 * 4, vk::Memory::Device, "y");
  Graph g(ctx);
  BOOST_CHECK_THROW(
      ops::linear_with(g, whole(x), wide, View{}, whole(y), 64, {.kernel = ops::LinearKernel::GemmCoopMat}), DeviceError);
  // Quantized blocks turned into f16 as q x scale: a weight past 65504 keeps the tiled GEMM
  // too, where its block would stage infinities; 60000 stays within both.
  for (DType dt : {DType::Q8_0, DType::Q4_0}) {
    Matrix q = Matrix::create(ctx, dt, 768, 768, "w");
    q.write_rows(0, 1, row.data(), DType::F32);
    BOOST_TEST(q.outside_f16, dtype_name(dt));
    BOOST_TEST((ops::auto_kernel(ctx, 64, q, whole(x)) == ops::LinearKernel::GemmTiled), dtype_name(dt));
    row[100] = 60000.0f;
    Matrix in_range = Matrix::create(ctx, dt, 768, 768, "w");
    in_range.write_rows(0, 1, row.data(), DType::F32);
    BOOST_TEST(!in_range.outside_f16, dtype_name(dt));
    row[100] = 70000.0f;
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(auto_picks_coopmat_for_prompts, *test::device_has(has_matrix_units, kNoMatrixUnits)) {
  check_auto_picks(test::context());
}

BOOST_AUTO_TEST_CASE(auto_picks_emulated_coopmat_for_prompts,
                     *test::device_has(test::can_emulate_coopmat, test::kCannotEmulateCoopmat)) {
  check_auto_picks(test::coopmat_emu_context());
}

// Where the device has no matrix units, forcing the kernel is a clear error.
BOOST_AUTO_TEST_CASE(forcing_coopmat_without_matrix_units_throws) {
  auto& ctx = test::fallback_context();  // no f16 arithmetic: never cooperative matrices
  BOOST_TEST_REQUIRE(!ops::coopmat_available(ctx, DType::F16));
  Matrix W = Matrix::create(ctx, DType::F16, 64, 64, "w");
  vk::Buffer x(ctx, 4 * 64 * 4), y(ctx, 4 * 64 * 4);
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::linear_with(g, whole(x), W, View{}, whole(y), 4, {.kernel = ops::LinearKernel::GemmCoopMat}),
                    DeviceError);
}
