// Time of sampling a batched decode step's 16 rows of GPT-2's 50257 logits: as the batched
// step did it before ops::sample_rows (per row a copy_rows to the sequence's own logits,
// then its own sample(): 32 dispatches), as those 16 sample() dispatches alone, and as one
// sample_rows dispatch. Greedy, temperature 0.8, 0.8 with top-p 0.9 alone, and 0.8 with
// top-k 40 and top-p 0.95. The three graphs run alternately, rep for rep, so that all meet
// the same machine state (the VM's speed drifts over seconds). The logits are normal
// random numbers, or a model's: 16 rows of float32 from the file given (e.g. rows of
// `gpt-vk forward --out x.npy` after the .npy header), whose nuclei differ row to row.
//   ninja -C build micro_sample_rows && build/bench/micro/micro_sample_rows [logits.f32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "engine/graph.hpp"
#include "engine/ops/copy_rows.hpp"
#include "engine/ops/sample.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/buffer.hpp"
#include "engine/vk/context.hpp"
#include "bench/micro/native_and_fallback.hpp"

using namespace gptvk;

namespace {

constexpr uint32_t kRows = 16, kVocab = 50257;
// Per-row buffers sit at multiples of this (a storage binding's offset alignment is at most 256).
constexpr uint64_t kAlign = 256;

uint64_t aligned(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::vector<float> g_logits;  // the rows to sample: from the file given, else normal numbers

std::vector<float> read_or_make_logits(const char* path) {
  std::vector<float> x(uint64_t(kRows) * kVocab);
  if (path) {
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(x.data()), std::streamsize(x.size() * 4))) {
      std::fprintf(stderr, "micro_sample_rows: %s holds fewer than %u rows of %u floats\n", path, kRows, kVocab);
      std::exit(1);
    }
    return x;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 2.5f);
  for (auto& v : x) v = d(rng);
  return x;
}

View row(const vk::Buffer& b, uint32_t r, uint64_t bytes) { return View{&b, r * aligned(bytes), bytes}; }

struct Batch {
  vk::Buffer logits, own_logits, ids, steps, scratch, table;
  Graph copied, alone, rows;

  Batch(vk::Context& ctx, const ops::SamplingParams& p)
      : logits(ctx, uint64_t(kRows) * kVocab * 4),
        own_logits(ctx, kRows * aligned(uint64_t(kVocab) * 4)),
        ids(ctx, kRows * kAlign),
        steps(ctx, kRows * kAlign),
        scratch(ctx, kRows * aligned(ops::sample_scratch_bytes(kVocab))),
        table(ctx, kRows * sizeof(ops::SampleRow)),
        copied(ctx),
        alone(ctx),
        rows(ctx) {
    logits.upload(g_logits.data(), g_logits.size() * 4);
    own_logits.fill_zero();
    steps.fill_zero();
    std::vector<ops::SampleRow> t;
    for (uint32_t b = 0; b < kRows; ++b) {
      auto q = p;
      q.seed = b;
      t.push_back(ops::sample_row(q, 0));
    }
    table.upload(t.data(), t.size() * sizeof(ops::SampleRow));
    const uint64_t lb = uint64_t(kVocab) * 4, sb = ops::sample_scratch_bytes(kVocab);
    for (uint32_t b = 0; b < kRows; ++b) {
      auto q = p;
      q.seed = b;
      const View id = row(ids, b, 4), step = row(steps, b, sizeof(StepState));
      ops::copy_rows(copied, whole(logits), row(own_logits, b, lb), b, 1, kVocab, "row_logits");
      ops::sample(copied, row(own_logits, b, lb), id, step, row(scratch, b, sb), kVocab, q);
      ops::sample(alone, row(own_logits, b, lb), id, step, row(scratch, b, sb), kVocab, q);
    }
    ops::sample_rows(rows, whole(logits), kRows, whole(table), View{&ids, 0, kRows * 4}, whole(scratch), kVocab,
                     ops::sampler_filters(p, kVocab));
    for (Graph* g : {&copied, &alone, &rows}) g->record();
  }
};

void bench(vk::Context& ctx, const char* label, const ops::SamplingParams& p) {
  Batch batch(ctx, p);
  Graph* graphs[3] = {&batch.copied, &batch.alone, &batch.rows};
  for (int i = 0; i < 3; ++i)
    for (Graph* g : graphs) g->run();  // the pipelines' JIT happens here
  constexpr int reps = 50;
  std::vector<double> wall[3];
  for (int i = 0; i < reps; ++i)
    for (int k = 0; k < 3; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      graphs[k]->run();
      wall[k].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  for (auto& w : wall) std::sort(w.begin(), w.end());
  std::printf("%s T=%.1f k=%u p=%.2f, %u rows of %u, submit+wait min / median ms: 16x(copy_rows+sample) %.2f / %.2f, "
              "16x sample %.2f / %.2f, sample_rows %.2f / %.2f\n",
              label, p.temperature, p.top_k, p.top_p, kRows, kVocab, wall[0][0], wall[0][reps / 2], wall[1][0],
              wall[1][reps / 2], wall[2][0], wall[2][reps / 2]);
}

void bench_all(vk::Context& ctx, const char* label) {
  for (const ops::SamplingParams& p : {ops::SamplingParams{0.0f, 0, 1.0f}, ops::SamplingParams{0.8f, 0, 1.0f},
                                       ops::SamplingParams{0.8f, 0, 0.9f}, ops::SamplingParams{0.8f, 40, 0.95f}})
    bench(ctx, label, p);
}

}  // namespace

int main(int argc, char** argv) {
  g_logits = read_or_make_logits(argc > 1 ? argv[1] : nullptr);
  return gptvk::micro::run_native_and_fallback(bench_all);
}
