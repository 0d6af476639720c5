#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/error.hpp"
#include "engine/ops/linear.hpp"
#include "engine/quant.hpp"
#include "tests/reference/linear.hpp"
#include "tests/support/linear_labels.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;
using test::describe_linear;

namespace {

// Tolerance relative to the largest |reference| output. The reference multiplies the
// dequantized weights (q * d, exact in f32: at most 8 + 11 significant bits) by x in
// double; the kernels sum in f32 (per block, then times d), so they differ by f32
// rounding alone: the float kernels' 1e-4 (tests/test_linear.cpp says why it is far
// below a dropped or doubled product, ~1e-2).
constexpr double kTol = 1e-4;

const LinearKernel kKernels[] = {LinearKernel::Auto,       LinearKernel::MatVec,        LinearKernel::MatVecWide,
                                 LinearKernel::MatVecTexel, LinearKernel::MatVecRows,   LinearKernel::MatVecRowsHeld,
                                 LinearKernel::MatVecCols,
                                 LinearKernel::GemmRegisters, LinearKernel::GemmRegistersWide,
                                 LinearKernel::GemmTiled};

// Whether forced kernel k runs here: the texel kernels need W's texel views, the column
// split x's and subgroup shuffles too, and K within what a lane holds.
bool runs(vk::Context& ctx, LinearKernel k, const Matrix& W) {
  if (k == LinearKernel::MatVecTexel) return W.has_texel_views();
  if (k == LinearKernel::MatVecCols || k == LinearKernel::MatVecRows || k == LinearKernel::MatVecRowsHeld)
    return W.has_texel_views() && ctx.caps().texel_uvec4 && ops::row_matvec_supported(ctx) &&
           (k != LinearKernel::MatVecCols || ops::column_split_fits(ctx, W.cols, W.dtype)) &&
           (k != LinearKernel::MatVecRowsHeld || ops::held_x_fits(W.cols, W.dtype));
  return true;
}

struct Case {
  Matrix m;
  std::vector<float> w;  // the dequantized weights, what the kernels multiply by
};

// How many of `back` (x quantized to dt and back, blocks of 32 in order) lie further from x
// than dt's rounding allows: half a step of amax / 127 (Q8_0, 0.57 for the f16 scale's own
// rounding) or one step of amax / 8 (Q4_0, whose range is asymmetric), amax the block's
// largest magnitude.
size_t outside_quant_step(const std::vector<float>& x, const std::vector<float>& back, DType dt) {
  size_t bad = 0;
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float step = dt == DType::Q8_0 ? amax / 127 : amax / 8;
    for (size_t i = 0; i < 32; ++i)
      bad += !(std::fabs(back[b + i] - x[b + i]) <= step * (dt == DType::Q8_0 ? 0.57f : 1.01f));
  }
  return bad;
}

Case make_weights(vk::Context& ctx, DType dt, uint32_t N, uint32_t K, uint32_t seed, uint64_t max_chunk = 0) {
  Case c;
  c.m = Matrix::create(ctx, dt, N, K, "test weights", max_chunk);
  auto w = test::random_floats(size_t(N) * K, seed);
  c.m.write_rows(0, N, w.data(), DType::F32);
  c.w = c.m.read_rows_f32(0, N);
  // What the device holds is w quantized: each weight within its block's step of w (so a
  // wrong scale or a misplaced block fails here, not only through the kernels).
  BOOST_TEST(outside_quant_step(w, c.w, dt) == 0u, dtype_name(dt) << " N=" << N << " K=" << K << " as stored");
  return c;
}

// y = act(x W^T + bias) (+ r, separate) through `kernel`, x with a texel view where the device makes one.
std::vector<float> run(vk::Context& ctx, LinearKernel kernel, const Matrix& W, const std::vector<float>& x,
                       const std::vector<float>& bias, const std::vector<float>& r, uint32_t T, Activation act) {
  const uint32_t N = W.rows;
  auto dx = test::upload(ctx, x);
  dx.try_create_texel_view();
  vk::Buffer dy(ctx, uint64_t(T) * N * 4, vk::Memory::Device, "test y");
  vk::Buffer db = test::upload(ctx, bias.empty() ? std::vector<float>(1) : bias);
  vk::Buffer dr = test::upload(ctx, r.empty() ? std::vector<float>(1) : r);
  Graph g(ctx);
  ops::linear_with(g, whole(dx), W, bias.empty() ? View{} : whole(db), whole(dy), T,
                   {.kernel = kernel, .ep = {act, !r.empty()}, .r = r.empty() ? View{} : whole(dr)});
  g.record();
  g.run();
  return test::download(dy, size_t(T) * N);
}

std::vector<float> reference(const Case& c, const std::vector<float>& x, const std::vector<float>& bias,
                             const std::vector<float>& r, uint32_t T, Activation act) {
  std::vector<float> y(size_t(T) * c.m.rows);
  cpu::linear(x, c.w, bias, r, y, T, c.m.cols, c.m.rows, act);
  return y;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(linear_quant, test::NoValidationMessages)

// Host quantization as ggml's reference: every Q8_0 value within half a step (d / 2) of
// its input, Q4_0 within d / 2 but for the block's extreme (d = extreme / -8, so +8 is
// clipped to 7: within d); plus the f16 rounding of the stored d (2^-11 relative, times
// |q| <= 127: 0.062 d). GGUF blocks repacked hold the same values.
BOOST_AUTO_TEST_CASE(host_quantization_round_trips) {
  const uint32_t cols = 96;
  auto x = test::random_floats(cols, 5, -2.0f, 2.0f);
  for (DType dt : {DType::Q8_0, DType::Q4_0}) {
    std::vector<std::byte> row(quant_row_bytes(dt, cols));
    quantize_row(x.data(), cols, dt, row.data());
    std::vector<float> back(cols);
    dequantize_row(row.data(), cols, dt, back.data());
    BOOST_TEST(outside_quant_step(x, back, dt) == 0u, dtype_name(dt));
    // The same blocks as a GGUF tensor stores them: scale, then data.
    std::vector<std::byte> ggml(cols / 32 * ggml_block_bytes(dt));
    for (uint32_t b = 0; b < cols / 32; ++b) {
      std::memcpy(ggml.data() + b * ggml_block_bytes(dt), row.data() + 2 * b, 2);
      std::memcpy(ggml.data() + b * ggml_block_bytes(dt) + 2, row.data() + 16 * quant_scale_words(cols) + b * quant_block_bytes(dt),
                  quant_block_bytes(dt));
    }
    std::vector<std::byte> repacked(row.size());
    repack_ggml_row(ggml.data(), cols, dt, repacked.data());
    BOOST_TEST((repacked == row), dtype_name(dt));
  }
}

// Every quantized kernel against the CPU reference, both types, on the device as it is and
// with its fallbacks forced: outputs not a multiple of any tile, 3 / 25 / 96 blocks a row
// (25 and 96: not a multiple of the 8 scales a word holds, nor of the lanes), tokens
// past a tile, GPT-2's vocabulary as outputs (Q8_0, on the device as it is: the fallbacks'
// kernels meet no new edge there). Each (kernel, type, shape) is a lavapipe compile of its
// own (0.1-1 s), so on the first three shapes the types alternate over the kernels (a Latin
// square, as in test_linear): every kernel meets both types, every shape both types.
BOOST_AUTO_TEST_CASE(every_kernel_matches_cpu) {
  struct Shape {
    uint32_t K, N;
    std::vector<uint32_t> tokens;
  };
  const Shape shapes[] = {{96, 77, {1, 5}}, {800, 130, {1, 37}}, {3072, 40, {1, 3}}, {64, 50257, {1}}};
  const DType types[] = {DType::Q8_0, DType::Q4_0};
  for (auto [label, ctx] : test::all_contexts())
    for (size_t si = 0; si < std::size(shapes); ++si)
      for (DType dt : types) {
        const Shape& s = shapes[si];
        if (s.N > 10000 && dt == DType::Q4_0) continue;
        if (ctx == &test::fallback_context() && s.N > 10000) continue;
        Case c = make_weights(*ctx, dt, s.N, s.K, 7 * s.K + s.N);
        for (size_t ki = 0; ki < std::size(kKernels); ++ki) {
          const LinearKernel k = kKernels[ki];
          if (s.N <= 10000 && dt != types[(si + ki) % std::size(types)]) continue;
          if (!runs(*ctx, k, c.m)) continue;
          for (uint32_t T : s.tokens) {
            auto x = test::random_floats(size_t(T) * s.K, T + s.K);
            auto bias = test::random_floats(s.N, 3);
            auto got = run(*ctx, k, c.m, x, bias, {}, T, Activation::None);
            BOOST_TEST(test::max_rel_error(got, reference(c, x, bias, {}, T, Activation::None)) <= kTol,
                       describe_linear(label, k, dt, T, s.K, s.N));
          }
        }
      }
}

// The epilogue (GELU, a separate residual) and a matrix split into row chunks (one
// dispatch per chunk, each kernel's offsets into W and y). Neither depends on the type but
// through the row's bytes, so the types alternate over the kernels, and from one context to
// the next.
BOOST_AUTO_TEST_CASE(epilogue_and_chunks) {
  const uint32_t K = 160, N = 300;
  const DType types[] = {DType::Q8_0, DType::Q4_0};
  const auto contexts = test::all_contexts();
  for (size_t ci = 0; ci < contexts.size(); ++ci)
    for (size_t ti = 0; ti < std::size(types); ++ti) {
      const auto& [label, ctx] = contexts[ci];
      const DType dt = types[ti];
      Case c = make_weights(*ctx, dt, N, K, 11, 64 * quant_row_bytes(dt, K));  // chunks of 64 rows
      BOOST_TEST(c.m.chunks.size() == 5u);
      for (size_t ki = 0; ki < std::size(kKernels); ++ki) {
        const LinearKernel k = kKernels[ki];
        if ((ki + ci) % std::size(types) != ti || !runs(*ctx, k, c.m)) continue;
        for (uint32_t T : {1u, 9u}) {
          auto x = test::random_floats(size_t(T) * K, 21 + T);
          auto bias = test::random_floats(N, 22), r = test::random_floats(size_t(T) * N, 23);
          auto got = run(*ctx, k, c.m, x, bias, r, T, Activation::GeluTanh);
          BOOST_TEST(test::max_rel_error(got, reference(c, x, bias, r, T, Activation::GeluTanh)) <= kTol,
                     describe_linear(label + " chunked gelu+residual", k, dt, T, K, N));
        }
      }
    }
}

// The kernel with no quantized form says so; so does a matrix whose rows are not whole blocks.
// (The cooperative-matrix GEMM has one: tests/test_linear_coopmat.cpp.)
BOOST_AUTO_TEST_CASE(unsupported_kernels_fail_loudly) {
  vk::Context& ctx = test::context();
  Case c = make_weights(ctx, DType::Q8_0, 64, 64, 1);
  auto x = test::random_floats(64, 2);
  BOOST_CHECK_THROW(run(ctx, LinearKernel::MatVecRowsBatch, c.m, x, {}, {}, 1, Activation::None), DeviceError);
  BOOST_CHECK_THROW(Matrix::create(ctx, DType::Q8_0, 4, 48, "odd"), InputError);
}

BOOST_AUTO_TEST_SUITE_END()
