// Throughput of the linear op (engine/ops/linear.hpp) at GPT-2 small's shapes (and the
// bundled model's LM head): the decode
// mat-vec (T = 1) and the prompt GEMM (T = 128, or TOKENS), each weight dtype (the
// block-quantized ones too), on the default device.
// Moved out of tests/test_linear.cpp, where it hid behind an environment variable.
//   ninja -C build micro_linear && build/bench/micro/micro_linear [FILTER [RUNS [TOKENS]]]
// FILTER (e.g. "gemm f16", "matvec q8_0", "gemm f16 50257 in=128") runs the lines whose
// label (kind, dtype, outputs, inputs) contains it; each
// line is the best of RUNS timed runs (default 3; more on a busy machine); TOKENS is the
// GEMM's prompt length (default 128; below 64 the GEMM takes its narrow tile). Prints wall time,
// GB/s and GFLOP/s, and the same per CPU-second (on a CPU device the kernels run on this
// process's threads, so CPU time / threads is what the wall time would be on an idle machine);
// a sample of outputs is checked against a double-precision sum. The same weights serve every
// timed dispatch, so they can stay in the CPU's caches; MICRO_COLD_WEIGHTS=1 (below) reads
// them from memory instead.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

using micro::random_floats;

vk::Buffer upload(vk::Context& ctx, const std::vector<float>& v) {
  vk::Buffer b(ctx, v.size() * 4);
  b.upload(v.data(), v.size() * 4);
  return b;
}

// Largest error of 300 sampled outputs against a double sum, relative to the largest |output|.
double sampled_error(const std::vector<float>& y, const std::vector<float>& x, const std::vector<float>& w,
                     const std::vector<float>& bias, uint32_t T, uint32_t K, uint32_t N) {
  std::mt19937 rng(7);
  double max_err = 0, max_ref = 1e-6;
  for (int i = 0; i < 300; ++i) {
    const uint32_t t = rng() % T, o = rng() % N;
    double ref = bias[o];
    for (uint32_t k = 0; k < K; ++k) ref += double(x[size_t(t) * K + k]) * w[size_t(o) * K + k];
    max_err = std::max(max_err, std::fabs(ref - y[size_t(t) * N + o]));
    max_ref = std::max(max_ref, std::fabs(ref));
  }
  return max_err / max_ref;
}

void bench_one(vk::Context& ctx, uint32_t T, DType dt, uint32_t N, uint32_t K, int runs) {
  const auto host_w = random_floats(size_t(N) * K, N + K);
  Matrix w = Matrix::create(ctx, dt, N, K, "bench weights");
  w.write_rows(0, N, host_w.data(), DType::F32);
  std::vector<float> rounded(host_w.size());
  if (is_quantized(dt)) {
    rounded = w.read_rows_f32(0, N);  // the dequantized blocks
  } else {
    std::vector<char> stored(host_w.size() * dtype_bytes(dt));
    convert(host_w.data(), DType::F32, stored.data(), dt, host_w.size());
    convert(stored.data(), dt, rounded.data(), DType::F32, host_w.size());
  }
  const auto x = random_floats(size_t(T) * K, 3), bias = random_floats(N, 4);
  vk::Buffer dx = upload(ctx, x), db = upload(ctx, bias);
  dx.try_create_texel_view();
  const double flops = 2.0 * T * K * N;
  // Enough back-to-back dispatches (independent outputs, so no barriers) for ~0.2 s.
  uint32_t reps = std::clamp<uint32_t>(static_cast<uint32_t>(2e9 / flops), 1, 64);
  // MICRO_COLD_WEIGHTS=1: the dispatches cycle through copies of W, ~400 MB in all, more
  // than the CPU's last-level cache, so the weights come from memory as a model's do.
  std::vector<Matrix> cold;
  if (const char* e = std::getenv("MICRO_COLD_WEIGHTS"); e && std::string(e) == "1") {
    const uint32_t n = static_cast<uint32_t>(std::clamp<double>(4e8 / double(w.bytes()), 2, 256));
    for (uint32_t i = 0; i < n; ++i) {
      cold.push_back(Matrix::create(ctx, dt, N, K, "cold weights"));
      cold.back().write_rows(0, N, host_w.data(), DType::F32);
    }
    reps = std::max(reps, n);
  }
  std::vector<vk::Buffer> ys;
  for (uint32_t i = 0; i < reps; ++i) ys.emplace_back(ctx, uint64_t(T) * N * 4);
  Graph g(ctx);
  for (uint32_t i = 0; i < reps; ++i) {
    const Matrix& wi = cold.empty() ? w : cold[i % cold.size()];
    ops::linear(g, whole(dx), wi, whole(db), whole(ys[i]), T);
  }
  g.record();
  g.run();  // warm up: pipelines, page faults
  double best = 1e30, best_cpu = 1e30;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    g.run();
    best_cpu = std::min(best_cpu, (cpu_seconds() - c0) / reps);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::vector<float> y(size_t(T) * N);
  ys.back().download(y.data(), y.size() * 4);
  std::printf("%s %s T=%u out=%u in=%u: %.3f ms wall, %.1f GB/s, %.1f GFLOP/s; per CPU-second %.1f GB/s, "
              "%.1f GFLOP/s (%u dispatches per run); sampled rel error %.1e\n",
              T == 1 ? "matvec" : "gemm", dtype_name(dt), T, N, K, best * 1e3, w.bytes() / best * 1e-9,
              flops / best * 1e-9, w.bytes() / best_cpu * 1e-9, flops / best_cpu * 1e-9, reps,
              sampled_error(y, x, rounded, bias, T, K, N));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const uint32_t gemm_tokens = argc > 3 ? uint32_t(std::max(2, std::atoi(argv[3]))) : 128;
  vk::Context ctx;
  std::printf("%s\n", ctx.summary().c_str());
  struct Shape {
    uint32_t N, K;
  };
  // GPT-2 small's four, then the bundled model's LM head (128 inputs).
  const Shape shapes[] = {{768, 768}, {3072, 768}, {768, 3072}, {50257, 768}, {50257, 128}};
  for (uint32_t T : {1u, gemm_tokens})
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
      for (const auto& s : shapes) {
        const std::string what = std::string(T == 1 ? "matvec " : "gemm ") + dtype_name(dt) + " " +
                                 std::to_string(s.N) + " in=" + std::to_string(s.K);
        if (what.find(only) != std::string::npos) bench_one(ctx, T, dt, s.N, s.K, runs);
      }
}
