// The cooperative-matrix GEMM (engine/ops/linear_coopmat.hpp) on a GPU with matrix units,
// at GPT-2 XL's prompt products and a decode batch: every matrix shape the device lists
// and several workgroup tiles, against the FP32 tiled GEMM, in TFLOP/s. A sample of each
// result is checked against a double-precision sum of the f16-rounded operands.
//   ninja -C build micro_coopmat && build/bench/micro/micro_coopmat
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/graph.hpp"
#include "engine/ops/linear.hpp"
#include "engine/tensor.hpp"
#include "engine/vk/buffer.hpp"
#include "engine/vk/context.hpp"
#include "bench/micro/random_floats.hpp"

using namespace gptvk;

namespace {

using micro::random_floats;

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::vector<float> back(v.size());
  convert(v.data(), DType::F32, h.data(), DType::F16, v.size());
  convert(h.data(), DType::F16, back.data(), DType::F32, v.size());
  return back;
}

struct Problem {
  uint32_t T, K, N;
  const char* name;
};

// Seconds per product (best of 3 runs of `reps` back-to-back dispatches) and the sampled error.
std::pair<double, double> time_product(vk::Context& ctx, const Problem& p, const ops::LinearArgs& args) {
  const auto host_w = random_floats(size_t(p.N) * p.K, p.N + p.K), x = random_floats(size_t(p.T) * p.K, 3);
  Matrix w = Matrix::create(ctx, DType::F16, p.N, p.K, "w");
  w.write_rows(0, p.N, host_w.data(), DType::F32);
  vk::Buffer dx(ctx, x.size() * 4);
  dx.upload(x.data(), x.size() * 4);
  const uint32_t reps = std::clamp<uint32_t>(static_cast<uint32_t>(2e11 / (2.0 * p.T * p.K * p.N)), 2, 32);
  std::vector<vk::Buffer> ys;
  for (uint32_t i = 0; i < reps; ++i) ys.emplace_back(ctx, uint64_t(p.T) * p.N * 4);
  Graph g(ctx);
  for (uint32_t i = 0; i < reps; ++i) ops::linear_with(g, whole(dx), w, View{}, whole(ys[i]), p.T, args);
  g.record();
  g.run();
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    g.run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::vector<float> y(size_t(p.T) * p.N);
  ys.back().download(y.data(), y.size() * 4);
  const auto xr = rounded(x), wr = rounded(host_w);
  std::mt19937 rng(7);
  double err = 0, ref_max = 1e-6;
  for (int i = 0; i < 200; ++i) {
    const uint32_t t = rng() % p.T, o = rng() % p.N;
    double ref = 0;
    for (uint32_t k = 0; k < p.K; ++k) ref += double(xr[size_t(t) * p.K + k]) * wr[size_t(o) * p.K + k];
    err = std::max(err, std::fabs(ref - y[size_t(t) * p.N + o]));
    ref_max = std::max(ref_max, std::fabs(ref));
  }
  return {best, err / ref_max};
}

}  // namespace

int main() {
  vk::Context ctx;
  std::printf("%s\n", ctx.summary().c_str());
  if (!ops::coopmat_available(ctx, DType::F16)) {
    std::printf("no cooperative matrices on this device\n");
    return 0;
  }
  const Problem problems[] = {{256, 1600, 4800, "xl qkv, 256-token chunk"},
                              {512, 1600, 6400, "xl fc, 512 tokens"},
                              {512, 6400, 1600, "xl proj, 512 tokens"},
                              {2048, 4096, 4096, "square 2048x4096x4096"},
                              {16, 1600, 6400, "xl fc, a batch of 16"}};
  struct Option {
    uint32_t wm, wn, tm, tn;
  };
  const Option options[] = {{2, 2, 2, 2}, {2, 2, 4, 2}, {2, 2, 2, 4}, {2, 2, 4, 4}, {4, 2, 2, 2},
                            {2, 4, 2, 2}, {4, 4, 2, 2}, {1, 4, 1, 2}, {1, 4, 1, 4}};
  for (const Problem& p : problems) {
    const double flops = 2.0 * p.T * p.K * p.N;
    auto [tiled, tiled_err] = time_product(ctx, p, {.kernel = ops::LinearKernel::GemmTiled});
    std::printf("%-28s gemm_tiled: %8.1f us %6.1f TFLOP/s (err %.1e)\n", p.name, tiled * 1e6, flops / tiled * 1e-12,
                tiled_err);
    auto [autos, auto_err] = time_product(ctx, p, {.kernel = ops::LinearKernel::GemmCoopMat});
    std::printf("%-28s coopmat (its own tiles): %8.1f us %6.1f TFLOP/s (err %.1e)\n", p.name, autos * 1e6,
                flops / autos * 1e-12, auto_err);
    for (const auto& shape : ctx.caps().coopmat.shapes)
      for (const Option& o : options) {
        auto tiles = ops::coopmat_tiles_of(ctx, shape, o.wm, o.wn, o.tm, o.tn);
        if (!tiles || shape.m % 8 || shape.n % 8 || shape.k % 8) continue;
        auto [s, err] = time_product(ctx, p, {.kernel = ops::LinearKernel::GemmCoopMat, .coopmat_tiles = &*tiles});
        std::printf("%-28s %ux%ux%u %ux%u sg of %ux%u (tile %ux%u): %8.1f us %6.1f TFLOP/s (err %.1e)\n", p.name,
                    shape.m, shape.n, shape.k, o.wm, o.wn, o.tm, o.tn, tiles->bm, tiles->bn, s * 1e6,
                    flops / s * 1e-12, err);
      }
  }
}
