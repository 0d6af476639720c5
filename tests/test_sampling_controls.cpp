// The sampling controls on the device (engine/ops/sample_controls.hpp): each penalty and the
// logit bias against a CPU reference of its formula on fixed logits, the penalty applying to
// logit + bias; the history kept on the device (the prompt written once, every sampled
// token appended by the sampler) against a CPU replay of the same decode loop; min-p never
// drawing below its threshold, and cutting only after top-p's nucleus; bias moving the
// argmax; the same seed reproducing every combination. On the device as it is and with its
// fallback paths forced.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "tests/reference/sample.hpp"
#include "engine/error.hpp"
#include "engine/ops/sample.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/step.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::SamplingParams;
using test::lm_logits;

namespace {

// The bias and penalties written out plainly (the order of engine/ops/sample_controls.hpp:
// bias first, the penalty on logit + bias). Min-p is the sampler's (cpu::sampling_probs).
std::vector<float> cpu_controls(const std::vector<float>& logits, const std::vector<uint32_t>& history,
                                const SamplingParams& p) {
  std::vector<float> out = logits;
  for (auto [t, b] : p.logit_bias) out[t] += b;
  if (p.penalties_on()) {
    size_t n = history.size();
    size_t begin = p.repeat_last_n < 0 || size_t(p.repeat_last_n) >= n ? 0 : n - size_t(p.repeat_last_n);
    std::map<uint32_t, uint32_t> count;
    for (size_t j = begin; j < n; ++j) ++count[history[j]];
    for (auto [t, c] : count) {
      float x = out[t];
      x = x > 0 ? x / p.repeat_penalty : x * p.repeat_penalty;
      out[t] = x - (float(c) * p.frequency_penalty + p.presence_penalty);
    }
  }
  return out;
}

// One sequence on the device: fixed logits, a history starting with `prompt`, and the
// recorded controls + sampler graph replayed once per token, as a decode loop does.
struct Sequence {
  Sequence(vk::Context& ctx, const std::vector<float>& x, const std::vector<uint32_t>& prompt, const SamplingParams& p)
      : vocab(static_cast<uint32_t>(x.size())),
        logits(test::upload(ctx, x)),
        ids(ctx, 4, vk::Memory::Host),
        step(ctx, sizeof(StepState), vk::Memory::Host),
        scratch(ctx, ops::sample_scratch_bytes(vocab)),
        state(ctx, vocab, 256),
        graph(ctx) {
    StepState s{0, 0, {0, 0}};
    step.upload(&s, sizeof s);
    state.reset(prompt);
    ops::sample(graph, whole(logits), whole(ids), whole(step), whole(scratch), vocab, p, "sample", &state);
    graph.record();
  }
  uint32_t next() {
    graph.run();
    return *static_cast<const uint32_t*>(ids.mapped());
  }
  std::vector<float> controlled() {
    std::vector<float> v(vocab);
    state.controlled().buffer->download(v.data(), vocab * 4);
    return v;
  }
  uint32_t vocab;
  vk::Buffer logits, ids, step, scratch;
  ops::SamplingState state;
  Graph graph;
};

// The controlled logits the device wrote for one step equal the reference's within 1e-5
// (float arithmetic in the same order; a fused multiply-add on the device may round once
// less). `edit` sets logits of its own.
void check_controls(vk::Context& ctx, const std::string& label, const SamplingParams& p,
                    void (*edit)(std::vector<float>&) = nullptr) {
  auto x = lm_logits(1000, 3, 2.0f);
  x[5] = 0.0f;  // a zero logit: the penalty's two branches agree on it
  if (edit) edit(x);
  std::vector<uint32_t> prompt = {5, 7, 7, 9, 11, 7, 500, 999, 9, 0, 0, 0, 42};
  SamplingParams greedy = p;
  greedy.temperature = 0;
  Sequence seq(ctx, x, prompt, greedy);
  const uint32_t token = seq.next();
  auto got = seq.controlled();
  auto want = cpu_controls(x, prompt, p);
  size_t bad = 0, changed = 0;
  for (uint32_t i = 0; i < x.size(); ++i) {
    if (want[i] != x[i]) ++changed;
    bool same = std::fabs(got[i] - want[i]) <= 1e-5f;
    if (!same && bad++ < 3) BOOST_TEST_MESSAGE(label << " token " << i << ": device " << got[i] << ", CPU " << want[i]);
  }
  BOOST_TEST(bad == 0u, label << ": " << bad << " controlled logits differ from the CPU reference");
  BOOST_TEST(changed > 0u, label << ": the controls changed nothing (the case tests nothing)");
  BOOST_TEST(token == cpu::argmax(want.data(), static_cast<uint32_t>(want.size())), label << ": greedy pick");
}

// The device as it is, its fallback paths, and a GPU's workgroup shape (GPTVK_FORCE=gpu:
// one wide workgroup with shared-memory reductions across subgroups).
std::vector<std::pair<std::string, vk::Context*>> contexts() {
  auto all = test::all_contexts();
  all.emplace_back("gpu paths", &test::gpu_paths_context());
  return all;
}

// The GPU-paths context's validation messages are not watched by NoValidationMessages.
struct GpuPathsMessages {
  uint64_t before = test::gpu_paths_context().validation_messages();
  ~GpuPathsMessages() {
    BOOST_TEST(test::gpu_paths_context().validation_messages() == before, "validation messages on the GPU paths");
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(sampling_controls, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(each_control_matches_its_formula) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    SamplingParams rep;
    rep.repeat_penalty = 1.3f;
    rep.repeat_last_n = -1;
    check_controls(*ctx, label + " repetition (whole history)", rep);
    rep.repeat_last_n = 4;  // the window: tokens 0, 0, 0, 42 only
    check_controls(*ctx, label + " repetition (last 4)", rep);
    rep.repeat_penalty = 0.7f;  // below 1 favours repeats
    check_controls(*ctx, label + " repetition 0.7", rep);
    SamplingParams freq;
    freq.frequency_penalty = 0.8f;
    check_controls(*ctx, label + " frequency", freq);
    SamplingParams pres;
    pres.presence_penalty = -0.6f;
    check_controls(*ctx, label + " presence", pres);
    SamplingParams bias;
    bias.logit_bias = {{3, 2.5f}, {700, -100.0f}, {3, 1.0f}};  // repeats add up
    check_controls(*ctx, label + " bias", bias);
    SamplingParams all;
    all.repeat_penalty = 1.5f;
    all.repeat_last_n = 8;
    all.frequency_penalty = 0.3f;
    all.presence_penalty = 0.2f;
    all.logit_bias = {{7, 3.0f}, {100, -2.0f}};
    all.min_p = 0.1f;
    check_controls(*ctx, label + " all", all);
  }
}

// A greedy decode loop with the penalties: each step's pick must be the argmax of the CPU
// reference on the history the CPU builds itself (prompt + its own picks), so the device's
// history must grow exactly as the tokens are sampled, and the controls re-read it.
BOOST_AUTO_TEST_CASE(history_grows_with_every_sampled_token) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    // A few strong tokens, so that penalising each pick moves the argmax on.
    auto x = lm_logits(500, 9, 0.5f);
    for (uint32_t t : {10u, 20u, 30u, 40u}) x[t] = 6.0f + 0.1f * t / 10;
    SamplingParams p;
    p.temperature = 0;
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 1.0f;
    p.repeat_last_n = 6;
    std::vector<uint32_t> history = {1, 2, 3};
    Sequence seq(*ctx, x, history, p);
    for (int i = 0; i < 12; ++i) {
      auto want = cpu_controls(x, history, p);
      uint32_t w = cpu::argmax(want.data(), static_cast<uint32_t>(want.size()));
      BOOST_TEST(seq.next() == w, label << " step " << i);
      history.push_back(w);
    }
    BOOST_TEST(seq.state.tokens() == history, label);
    std::set<uint32_t> picked(history.begin() + 3, history.end());
    BOOST_TEST(picked.size() > 2u, label << ": the penalty should rotate the picks");
  }
}

BOOST_AUTO_TEST_CASE(min_p_never_samples_below_its_threshold) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    auto x = lm_logits(2000, 17, 1.5f);
    SamplingParams p{1.0f, 0, 1.0f, 99};
    p.min_p = 0.2f;
    const float m = *std::max_element(x.begin(), x.end());
    size_t allowed = std::count_if(x.begin(), x.end(), [&](float v) { return v >= m + std::log(0.2f); });
    BOOST_TEST(allowed > 1u);
    Sequence seq(*ctx, x, {}, p);
    std::set<uint32_t> seen;
    for (int i = 0; i < 300; ++i) {
      uint32_t t = seq.next();
      seen.insert(t);
      BOOST_TEST(x[t] >= m + std::log(0.2f), label << ": token " << t << " below min-p's threshold");
    }
    BOOST_TEST(seen.size() > 1u, label << ": min-p kept only the argmax");
  }
}

// The penalty applies to logit + bias (transformers and llama.cpp add the bias first): with
// repeat penalty 2, a repeated token at -0.249 with bias +5 becomes (-0.249 + 5) / 2 =
// 2.3755 (bias after the penalty gave 4.502); one at 1 with bias -3 becomes -4 (not -2.5);
// one at 3 with bias -1 becomes 1 (not 0.5). The numbers are written out, not only the
// reference's.
BOOST_AUTO_TEST_CASE(bias_applies_before_the_penalty) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    auto x = lm_logits(1000, 3, 1.0f);
    x[7] = -0.249f;
    x[9] = 1.0f;
    x[42] = 3.0f;
    SamplingParams p{0.0f, 0, 1.0f, 0};
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = -1;
    p.logit_bias = {{7, 5.0f}, {9, -3.0f}, {42, -1.0f}, {100, 0.5f}};
    const std::vector<uint32_t> prompt = {7, 9, 42, 7};
    Sequence seq(*ctx, x, prompt, p);
    seq.next();
    const auto got = seq.controlled();
    BOOST_TEST(std::fabs(got[7] - 2.3755f) <= 1e-5f, label << ": token 7 " << got[7]);
    BOOST_TEST(std::fabs(got[9] - -4.0f) <= 1e-5f, label << ": token 9 " << got[9]);
    BOOST_TEST(std::fabs(got[42] - 1.0f) <= 1e-5f, label << ": token 42 " << got[42]);
    BOOST_TEST(got[100] == x[100] + 0.5f, label << ": an unpenalised token gets its bias only");
    BOOST_TEST(got[8] == x[8], label << ": a token with neither is left alone");
    check_controls(*ctx, label + " bias on penalised tokens", p, [](std::vector<float>& v) {
      v[7] = -0.249f;
      v[9] = 1.0f;
    });
  }
}

// Min-p through sample() with a sequence's state, after the logit bias: it cuts what the
// nucleus of the biased logits kept (test_sample's min_p_cuts_after_the_nucleus has the
// sampler alone). The bias lifts a tail token into the head and drops a head token into the
// tail; every draw is the CPU's (bias, then top-p, then min-p), and some fall on head
// tokens a nucleus taken after min-p's cut would drop.
BOOST_AUTO_TEST_CASE(min_p_cuts_after_the_nucleus_with_a_bias) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    const auto x = test::head_and_tail_logits(4099);
    const uint32_t tail = 5, head = 11;  // where head_and_tail_logits puts a tail and the first head token
    BOOST_TEST_REQUIRE((x[tail] <= -3.0f && x[head] == -0.5f));
    SamplingParams p{1.0f, 0, 0.8f, 61};
    p.min_p = 0.1f;
    p.logit_bias = {{tail, 2.0f}, {head, -3.0f}};
    const auto biased = cpu_controls(x, {}, p);
    const auto probs = cpu::sampling_probs(biased.data(), 4099, p);
    auto cut = biased;
    for (auto& v : cut) v = v < std::log(p.min_p) ? -INFINITY : v;  // the top logit is 0
    const auto cut_first = cpu::sampling_probs(cut.data(), 4099, SamplingParams{p.temperature, 0, p.top_p, p.seed});
    BOOST_TEST_REQUIRE((probs[tail] > 0 && probs[head] == 0));
    Sequence seq(*ctx, x, {}, p);
    size_t differ = 0, past_cut_first = 0;
    for (uint32_t i = 0; i < 200; ++i) {
      const uint32_t t = seq.next();
      const double u = cpu::sample_uniform(p.seed, i);
      differ += !cpu::agrees_at_a_cdf_step(probs, u, t, cpu::pick(probs, u));
      past_cut_first += cut_first[t] == 0;
    }
    BOOST_TEST(differ == 0u, label << ": " << differ << " of 200 draws differ from the CPU");
    BOOST_TEST(past_cut_first >= 10u, label << ": " << past_cut_first << " of 200 draws outside the nucleus taken after min-p");
    BOOST_TEST(seq.state.tokens().size() == 200u, label << ": every draw appended to the history");
  }
}

// A repeat penalty of 1e-45 divides a positive logit past the float range, as a bias of
// 3.4e38 adds it past: the results stay finite (the largest float), so the sampler's
// softmax has no infinity to make NaN of, and every draw falls on a token the controls
// lifted to the top, never on the banned token 0 (an infinity drew token 0 every time).
BOOST_AUTO_TEST_CASE(controls_past_the_float_range_stay_finite) {
  GpuPathsMessages watch;
  for (auto [label, ctx] : contexts()) {
    auto x = lm_logits(1000, 5, 1.0f);
    const std::vector<uint32_t> prompt = {3, 17, 17, 250, 999};
    for (uint32_t t : prompt) x[t] = 2.0f;  // positive: the penalty divides them
    SamplingParams p{1.0f, 0, 1.0f, 77};
    p.repeat_penalty = 1e-45f;
    p.repeat_last_n = -1;
    p.logit_bias = {{0, -100.0f}, {600, 3.4e38f}, {601, -3.4e38f}};
    x[600] = 1e37f;  // past the range with their bias
    x[601] = -1e37f;
    Sequence seq(*ctx, x, prompt, p);
    std::set<uint32_t> drawn;
    for (int i = 0; i < 40; ++i) drawn.insert(seq.next());
    const auto got = seq.controlled();
    const float top = std::numeric_limits<float>::max();
    BOOST_TEST(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }), label);
    BOOST_TEST(got[17] == top, label);
    BOOST_TEST(got[600] == top, label);
    BOOST_TEST(got[601] == -top, label);
    for (uint32_t t : drawn)
      BOOST_TEST((t == 3 || t == 17 || t == 250 || t == 999 || t == 600), label << ": drew token " << t);
  }
}

BOOST_AUTO_TEST_CASE(logit_bias_moves_the_argmax) {
  for (auto [label, ctx] : test::all_contexts()) {
    auto x = lm_logits(1000, 21, 1.0f);
    const uint32_t top = cpu::argmax(x.data(), 1000);
    SamplingParams p{0.0f, 0, 1.0f, 0};
    p.logit_bias = {{123, 50.0f}};
    BOOST_TEST(Sequence(*ctx, x, {}, p).next() == 123u, label);
    p.logit_bias = {{top, -100.0f}};
    auto second = x;
    second[top] = -INFINITY;
    BOOST_TEST(Sequence(*ctx, x, {}, p).next() == cpu::argmax(second.data(), 1000), label);
    p.logit_bias.clear();
    BOOST_TEST(Sequence(*ctx, x, {}, p).next() == top, label);
  }
}

// Sampled draws with every control on: the same seed gives the same tokens, another seed
// others, and each draw is the CPU sampler's pick from the CPU's controlled logits.
BOOST_AUTO_TEST_CASE(same_seed_reproduces_every_combination) {
  auto x = lm_logits(1000, 33, 1.0f);
  auto& ctx = test::context();
  for (int combo = 0; combo < 8; ++combo) {
    SamplingParams p{0.9f, combo & 1 ? 50u : 0u, combo & 2 ? 0.9f : 1.0f, 1234};
    p.repeat_penalty = 1.2f;
    p.frequency_penalty = combo & 4 ? 0.5f : 0.0f;
    p.presence_penalty = 0.3f;
    p.min_p = 0.02f;
    p.logit_bias = {{4, 1.0f}};
    std::vector<uint32_t> prompt = {4, 4, 8};
    auto run = [&](uint64_t seed) {
      SamplingParams q = p;
      q.seed = seed;
      Sequence s(ctx, x, prompt, q);
      std::vector<uint32_t> out;
      for (int i = 0; i < 20; ++i) out.push_back(s.next());
      return out;
    };
    auto a = run(1234), b = run(1234), c = run(4321);
    BOOST_TEST(a == b, "combination " << combo);
    BOOST_TEST(a != c, "combination " << combo);
    // The CPU: controls on its own history, then the plain sampler at the same counters.
    std::vector<uint32_t> history = prompt;
    SamplingParams plain{p.temperature, p.top_k, p.top_p, p.seed};
    plain.min_p = p.min_p;  // the sampler's stage, after top-p
    size_t differ = 0;
    for (uint32_t i = 0; i < a.size(); ++i) {
      auto controlled = cpu_controls(x, history, p);
      const auto probs = cpu::sampling_probs(controlled.data(), 1000, plain);
      const double u = cpu::sample_uniform(plain.seed, i);
      differ += !cpu::agrees_at_a_cdf_step(probs, u, a[i], cpu::pick(probs, u));
      history.push_back(a[i]);  // follow the device's path
    }
    BOOST_TEST(differ == 0u, "combination " << combo << ": " << differ << " draws differ from the CPU");
  }
}

BOOST_AUTO_TEST_CASE(bad_controls_are_rejected) {
  auto bad = [](auto edit) {
    SamplingParams p;
    edit(p);
    BOOST_CHECK_THROW(ops::check_sampling_params(p), UsageError);
  };
  bad([](SamplingParams& p) { p.min_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = -0.1f; });
  bad([](SamplingParams& p) { p.repeat_penalty = 0.0f; });
  bad([](SamplingParams& p) { p.repeat_penalty = NAN; });
  bad([](SamplingParams& p) { p.repeat_last_n = -2; });
  bad([](SamplingParams& p) { p.frequency_penalty = INFINITY; });
  bad([](SamplingParams& p) { p.logit_bias = {{1, NAN}}; });
  // A bias for a token outside the vocabulary is found when the graph is built.
  auto& ctx = test::context();
  SamplingParams p;
  p.logit_bias = {{5000, 1.0f}};
  BOOST_CHECK_THROW(Sequence(ctx, lm_logits(1000, 1, 1.0f), {}, p), UsageError);
}

BOOST_AUTO_TEST_SUITE_END()
