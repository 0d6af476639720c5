// Prompt attention on matrix units (ops::attention_coopmat) against the CPU reference, on
// emulated cooperative matrices (GPTVK_FORCE=gpu,coopmat_emu) so that lavapipe runs it, and
// on the device's own where it has them. The kernel rounds q, k, v and the softmax weights
// to f16: the reference gets q, k and v rounded the same way, so what is left is the
// weights' rounding (2^-11 relative, on outputs that are convex combinations of values) and
// the order of the sums: measured up to 1.8e-4 of the largest output on lavapipe. A missing
// or extra key, an off-by-one in the causal mask or a missed rescale moves outputs by 1e-2
// or more.
#include <sstream>

#include "engine/dtype.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/attention_coopmat.hpp"
#include "engine/ops/step.hpp"
#include "tests/reference/attention.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::AttentionShape;

namespace {

constexpr double kTol = 1e-3;

// Two chunks of a prompt (T1 tokens, then T2 at position T1), each kv_append then
// attention_coopmat in one graph, against the reference. Queries and keys are scaled up
// for some heads and positions, so that some softmaxes are peaked and others flat.
void check_chunks(vk::Context& ctx, AttentionShape s, uint32_t T1, uint32_t T2) {
  const uint32_t C = s.n_heads * s.head_dim, T_max = std::max(T1, T2);
  vk::Buffer step(ctx, sizeof(StepState), vk::Memory::Host, "step");
  vk::Buffer qkv(ctx, uint64_t(T_max) * 3 * C * 4), out(ctx, uint64_t(T_max) * C * 4);
  vk::Buffer k_cache(ctx, ops::kv_cache_bytes(s)), v_cache(ctx, ops::kv_cache_bytes(s));
  std::vector<float> k_host(size_t(s.context) * C), v_host(size_t(s.context) * C);
  uint32_t pos0 = 0;
  for (uint32_t T : {T1, T2}) {
    auto x = test::random_floats(size_t(T) * 3 * C, 11 + pos0, -1.0f, 1.0f);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t h = 0; h < s.n_heads; ++h)
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          x[size_t(t) * 3 * C + h * s.head_dim + d] *= h % 2 ? 3.0f : 0.2f;
          x[size_t(t) * 3 * C + C + h * s.head_dim + d] *= (pos0 + t) % 7 == 3 ? 4.0f : 1.0f;
        }
    x = test::rounded_to(x, DType::F16);
    qkv.upload(x.data(), x.size() * 4);
    StepState st{pos0, 0, {0, 0}};
    step.upload(&st, sizeof st);
    Graph g(ctx);
    ops::kv_append(g, whole(qkv), whole(step), whole(k_cache), whole(v_cache), T, s);
    ops::attention_coopmat(g, whole(qkv), whole(step), whole(k_cache), whole(v_cache), whole(out), T, s);
    g.record();
    g.run();
    cpu::kv_append(x, k_host, v_host, pos0, T, s);
    const auto want = cpu::attention(x, k_host, v_host, pos0, T, s);
    std::ostringstream what;
    what << "heads=" << s.n_heads << " hd=" << s.head_dim << (s.kv_f16 ? " kv=f16" : "") << " T=" << T << " at "
         << pos0;
    const double err = test::max_rel_error(test::download(out, want.size()), want);
    BOOST_TEST_MESSAGE(what.str() << ": rel err " << err);
    BOOST_TEST(err <= kTol, what.str() << ": rel err " << err);
    pos0 += T;
  }
}

// Head layouts of GPT-2 (64 dims, f32 caches) and GPT-1's 128-dim test model (f16 caches);
// contexts that are no multiple of the key tile; chunks that are no multiple of the query
// tile, the second starting mid-tile. (Each layout is a pipeline that lavapipe takes
// seconds to compile, emulated.)
void check_shapes(vk::Context& ctx) {
  const uint64_t messages = ctx.validation_messages();
  BOOST_TEST_MESSAGE(ctx.info().name << ": " << ctx.caps().coopmat.describe());
  check_chunks(ctx, {3, 64, 150}, 70, 45);
  check_chunks(ctx, {2, 128, 90, true}, 37, 50);
  BOOST_TEST(ctx.validation_messages() == messages, "validation layer reported: " << ctx.last_validation_message());
}

const auto has_matrix_units = [](vk::Context& c) { return ops::coopmat_attention_tiles(c, {1, 64, 64}).has_value(); };

}  // namespace

BOOST_AUTO_TEST_CASE(coopmat_attention_matches_cpu,
                     *test::device_has(has_matrix_units, "has no cooperative matrices (or this build no such shader)")) {
  check_shapes(test::context());
}

BOOST_AUTO_TEST_CASE(emulated_coopmat_attention_matches_cpu,
                     *test::device_has(test::can_emulate_coopmat, test::kCannotEmulateCoopmat)) {
  auto& ctx = test::coopmat_emu_context();
  BOOST_TEST_REQUIRE(ops::coopmat_attention_tiles(ctx, {1, 64, 64}).has_value());
  check_shapes(ctx);
}

// Where the head dim does not divide into the matrices' sides, there are no tiles, and
// forcing the op is a clear error.
BOOST_AUTO_TEST_CASE(refuses_what_it_cannot_tile) {
  auto& ctx = test::coopmat_emu_context();
  const AttentionShape odd{2, 36, 64};
  BOOST_TEST(!ops::coopmat_attention_tiles(ctx, odd).has_value());
  vk::Buffer b(ctx, 1 << 16);
  Graph g(ctx);
  BOOST_CHECK_THROW(ops::attention_coopmat(g, whole(b), whole(b), whole(b), whole(b), whole(b), 4, odd), std::logic_error);
}
