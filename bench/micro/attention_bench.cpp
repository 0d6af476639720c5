// Time of one decode step of GPT-2 small's attention shape (12 heads of 64, a 1024-token
// cache) at positions 128 and 1000, as kv_append + attention and as the fused dispatch,
// with f32 and with f16 caches, on the default device and on the forced-fallback one.
// The two cache types run alternately, step for step, so that both meet the same machine
// state (on a shared VM its speed drifts over seconds). Moved out of
// tests/test_attention.cpp, where it hid behind an environment variable.
//   ninja -C build micro_attention && build/bench/micro/micro_attention
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/graph.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/buffer.hpp"
#include "engine/vk/context.hpp"
#include "bench/micro/native_and_fallback.hpp"
#include "bench/micro/random_floats.hpp"

using namespace gptvk;

namespace {

using micro::random_floats;

// One layer's decode step: qkv, a step state, full caches of noise, the output.
struct Step {
  ops::AttentionShape s;
  vk::Buffer step, qkv, k_cache, v_cache, out;
  Graph graph;

  Step(vk::Context& ctx, ops::AttentionShape shape, bool fused) : s(shape), graph(ctx) {
    const size_t C = size_t(s.n_heads) * s.head_dim;
    step = vk::Buffer(ctx, sizeof(StepState), vk::Memory::Host, "step");
    std::memset(step.mapped(), 0, sizeof(StepState));
    const auto x = random_floats(3 * C, 1);
    qkv = vk::Buffer(ctx, x.size() * 4);
    qkv.upload(x.data(), x.size() * 4);
    out = vk::Buffer(ctx, C * 4);
    const auto noise = random_floats(size_t(s.context) * C, 9);
    std::vector<uint16_t> halves(noise.size());
    for (size_t i = 0; i < noise.size(); ++i) halves[i] = f32_to_f16(noise[i]);
    const void* bytes = s.kv_f16 ? static_cast<const void*>(halves.data()) : noise.data();
    for (vk::Buffer* b : {&k_cache, &v_cache}) {
      *b = vk::Buffer(ctx, ops::kv_cache_bytes(s));
      b->upload(bytes, ops::kv_cache_bytes(s));
      b->try_create_texel_view();
    }
    qkv.try_create_texel_view();
    if (fused) {
      ops::kv_append_attention(graph, whole(qkv), whole(step), whole(k_cache), whole(v_cache), whole(out), 1, s);
    } else {
      ops::kv_append(graph, whole(qkv), whole(step), whole(k_cache), whole(v_cache), 1, s);
      ops::attention(graph, whole(qkv), whole(step), whole(k_cache), whole(v_cache), whole(out), 1, s);
    }
    graph.record();
  }
  void set_pos(uint32_t pos) { static_cast<StepState*>(step.mapped())->pos = pos; }
};

void bench(vk::Context& ctx, const char* label) {
  for (bool fused : {false, true}) {
    Step f32(ctx, {12, 64, 1024, false}, fused), f16(ctx, {12, 64, 1024, true}, fused);
    Step* steps[2] = {&f32, &f16};
    for (uint32_t pos : {128u, 1000u}) {
      for (Step* s : steps) s->set_pos(pos);
      for (int i = 0; i < 3; ++i)
        for (Step* s : steps) s->graph.run();
      constexpr int reps = 100;
      std::vector<double> wall[2];
      for (int i = 0; i < reps; ++i)
        for (int k = 0; k < 2; ++k) {
          const auto t0 = std::chrono::steady_clock::now();
          steps[k]->graph.run();
          wall[k].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
      for (auto& w : wall) std::sort(w.begin(), w.end());
      std::printf("attention %s %s 12x64 pos %u, step (submit+wait) min / median us: f32 cache %.0f / %.0f, "
                  "f16 cache %.0f / %.0f; f16/f32 medians %.3f\n",
                  label, fused ? "fused" : "separate", pos, wall[0][0], wall[0][reps / 2], wall[1][0],
                  wall[1][reps / 2], wall[1][reps / 2] / wall[0][reps / 2]);
    }
  }
}

}  // namespace

int main() { return gptvk::micro::run_native_and_fallback(bench); }
