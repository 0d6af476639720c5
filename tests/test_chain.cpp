#define BOOST_TEST_MODULE chain
// Dispatch chaining (engine/graph.hpp, Caps::chain; GPTVK_FORCE=chain): dispatches that
// wait for each other through arrival counters instead of pipeline barriers compute
// exactly what the barrier graph computes (the same kernels, bit for bit), take no
// barriers between them, and a wait that runs out makes the model run the step again with
// barriers. Lavapipe runs one dispatch after another, so here a wait is met at once; on a
// GPU the same tests check the counters themselves.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "engine/ops/linear.hpp"
#include "models/gpt_model.hpp"
#include "models/weights.hpp"
#include "tests/support/model_cases.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using test::Case, test::for_each_case, test::rel_error, test::tolerance;

namespace {

// Logits that differ from `want` anywhere, as a count (chaining changes no arithmetic).
size_t differences(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::max(got.size(), want.size());
  size_t n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += std::memcmp(&got[i], &want[i], 4) != 0;
  return n;
}

// Two mat-vecs in a row, y1 = W1 x + b1 and y2 = W2 y1 + y1[:N2] (a residual), on `ctx`'s
// kernel choices; returns y2 and the graph's barrier count.
struct TwoLinears {
  std::vector<float> y2;
  size_t barriers = 0;
  bool timed_out = false;
};
TwoLinears two_linears(vk::Context& ctx, bool chain, DType dtype) {
  const uint32_t K = 96, N1 = 200, N2 = 72;
  Matrix w1 = Matrix::create(ctx, dtype, N1, K, "W1"), w2 = Matrix::create(ctx, dtype, N2, N1, "W2");
  const auto w1v = test::random_floats(size_t(N1) * K, 1), w2v = test::random_floats(size_t(N2) * N1, 2);
  w1.write_rows(0, N1, w1v.data(), DType::F32);
  w2.write_rows(0, N2, w2v.data(), DType::F32);
  auto x = test::upload(ctx, test::random_floats(K, 3));
  auto b1 = test::upload(ctx, test::random_floats(N1, 4));
  auto r = test::upload(ctx, test::random_floats(N2, 5));
  vk::Buffer y1(ctx, N1 * 4), y2(ctx, N2 * 4);
  Graph g(ctx);
  g.set_chaining(chain);
  ops::linear(g, whole(x), w1, whole(b1), whole(y1), 1, {}, {}, "first");
  ops::linear(g, whole(y1), w2, {}, whole(y2), 1, {Activation::None, true}, whole(r), "second");
  g.record();
  g.run();
  return {test::download(y2, N2), g.barrier_count(), g.chain_timed_out()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chain)

// The second mat-vec waits for the first through the counters, not a barrier, and gets
// the barrier graph's results bit for bit, with and without its early weight loads.
BOOST_AUTO_TEST_CASE(chained_linears_take_no_barrier) {
  auto& plain_ctx = test::gpu_paths_context();
  for (const char* mode : {"chain", "chain=wait"}) {
    auto& ctx = test::gpu_paths_context(mode);
    const uint64_t messages = ctx.validation_messages();
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      BOOST_TEST_CONTEXT(mode << ", dtype " << dtype_name(dt)) {
        const TwoLinears plain = two_linears(plain_ctx, false, dt), chained = two_linears(ctx, true, dt);
        BOOST_TEST(plain.barriers == 1u);
        BOOST_TEST(chained.barriers == 0u);
        BOOST_TEST(!chained.timed_out);
        BOOST_TEST(differences(chained.y2, plain.y2) == 0u);
      }
    }
    BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
  }
}

// A wait that cannot be met (GPTVK_FORCE=chain=timeout: one arrival more than the
// dispatch before has workgroups) gives up and flags the run instead of hanging.
BOOST_AUTO_TEST_CASE(a_wait_that_cannot_be_met_flags_the_run) {
  const TwoLinears run = two_linears(test::gpu_paths_context("chain=timeout"), true, DType::F16);
  BOOST_TEST(run.timed_out);
}

// Whole models: a chunked prefill (not chained: prompt chunks take the GEMMs), then decode
// steps whose layers run as one chain, with the LayerNorms folded into the mat-vecs: the
// logits are the barrier graph's bit for bit, and PyTorch's within the usual tolerance.
BOOST_AUTO_TEST_CASE(chained_decode_matches_the_barrier_graph) {
  auto& plain_ctx = test::gpu_paths_context();
  for_each_case([&](const Case& c) {
    const uint32_t V = c.cfg.vocab_size;
    const size_t n = std::min<size_t>(c.ids.size() - 1, 16), end = std::min<size_t>(c.ids.size(), n + 6);
    GptModel plain(plain_ctx, c.cfg, load_weights(plain_ctx, c.cfg), 16);
    plain.prefill(std::span(c.ids).first(n), 0, false);
    std::vector<std::vector<float>> want;
    for (size_t t = n; t < end; ++t) want.push_back(plain.decode_logits(c.ids[t], static_cast<uint32_t>(t)));
    for (const char* mode : {"chain", "chain=wait"}) {
      auto& ctx = test::gpu_paths_context(mode);
      const uint64_t messages = ctx.validation_messages();
      GptModel model(ctx, c.cfg, load_weights(ctx, c.cfg), 16);
      model.prefill(std::span(c.ids).first(n), 0, false);
      size_t differing = 0;
      double worst = 0;
      for (size_t t = n; t < end; ++t) {
        auto logits = model.decode_logits(c.ids[t], static_cast<uint32_t>(t));
        differing += differences(logits, want[t - n]);
        worst = std::max(worst, rel_error(logits, c.logits, t, 1, V));
      }
      BOOST_TEST_MESSAGE(c.name << ": " << mode << ", decode max rel error " << worst);
      BOOST_TEST(differing == 0u, mode << ": " << differing << " logits differ from the barrier graph's");
      BOOST_TEST(worst <= tolerance(c.cfg));
      BOOST_TEST(model.chaining());
      BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
    }
  });
}

// The first decode step's chain times out (the test hook): the model puts back the ids and
// step state the sampler had changed, runs the step again with barriers and keeps them.
// Sampled tokens (temperature 1, fixed seed: the RNG counter must be put back too) are
// the barrier graph's, token for token.
BOOST_AUTO_TEST_CASE(a_timed_out_step_runs_again_with_barriers) {
  auto& plain_ctx = test::gpu_paths_context();
  auto& ctx = test::gpu_paths_context("chain=timeout");
  const uint64_t messages = ctx.validation_messages();
  Case c = test::load_case(test::case_dirs().front());
  const size_t n = std::min<size_t>(c.ids.size() - 1, 12);
  auto generate = [&](vk::Context& on, bool& chaining_after) {
    GptModel model(on, c.cfg, load_weights(on, c.cfg), 16);
    model.set_sampling({1.0f, 0, 1.0f, 1234});
    std::vector<uint32_t> tokens = {model.prefill_and_sample(std::span(c.ids).first(n))};
    for (int i = 0; i < 5; ++i) tokens.push_back(model.decode_next());
    chaining_after = model.chaining();
    return tokens;
  };
  bool plain_chaining = true, chained_chaining = true;
  const auto want = generate(plain_ctx, plain_chaining), got = generate(ctx, chained_chaining);
  BOOST_TEST(!plain_chaining);
  BOOST_TEST(!chained_chaining, "the model still chains after a timed-out step");
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

BOOST_AUTO_TEST_SUITE_END()
