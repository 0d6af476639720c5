#include <algorithm>
#include <cmath>
#include <set>

#include "tests/reference/sample.hpp"
#include "engine/error.hpp"
#include "engine/ops/sample.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/step.hpp"
#include "tests/support/ops/argmax.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::SamplingParams;
using test::lm_logits;

namespace {

std::vector<uint32_t> download_ids(const vk::Buffer& b, size_t n) {
  std::vector<uint32_t> v(n);
  b.download(v.data(), n * 4);
  return v;
}

// `count` draws with step counters first, first + 1, ... in one dispatch (ops::sample_many).
std::vector<uint32_t> draw_many(vk::Context& ctx, const std::vector<float>& logits, const SamplingParams& p,
                                uint32_t first, uint32_t count) {
  auto vocab = static_cast<uint32_t>(logits.size());
  auto dl = test::upload(ctx, logits);
  vk::Buffer ids(ctx, count * 4), step(ctx, sizeof(StepState), vk::Memory::Host),
      scratch(ctx, count * ops::sample_scratch_bytes(vocab));
  StepState s{0, first, {0, 0}};
  step.upload(&s, sizeof s);
  Graph g(ctx);
  ops::sample_many(g, whole(dl), whole(ids), whole(step), whole(scratch), vocab, count, p);
  g.record();
  g.run();
  StepState after;
  step.download(&after, sizeof after);
  BOOST_TEST(after.rng_step == first);  // sample_many only reads the step
  return download_ids(ids, count);
}

// One recorded single-token graph, replayed: what a decode loop does.
struct Sampler {
  Sampler(vk::Context& ctx, const std::vector<float>& x, const SamplingParams& p)
      : logits(test::upload(ctx, x)),
        ids(ctx, 4),
        step(ctx, sizeof(StepState), vk::Memory::Host),
        scratch(ctx, ops::sample_scratch_bytes(static_cast<uint32_t>(x.size()))),
        graph(ctx) {
    set_step({0, 0, {0, 0}});
    ops::sample(graph, whole(logits), whole(ids), whole(step), whole(scratch), static_cast<uint32_t>(x.size()), p);
    graph.record();
  }
  uint32_t next() {
    graph.run();
    return download_ids(ids, 1)[0];
  }
  void set_step(StepState s) { step.upload(&s, sizeof s); }
  StepState get_step() const {
    StepState s;
    step.download(&s, sizeof s);
    return s;
  }
  vk::Buffer logits, ids, step, scratch;
  Graph graph;
};

// Checks draws made with counters first.. against the reference, token by token: at least
// 99% exactly (the device sums weights in float with compensation, the CPU in double), the
// rest only where u lies within 1e-6 of a CDF step.
void check_against_cpu(const std::vector<float>& logits, const SamplingParams& p, uint32_t first,
                       const std::vector<uint32_t>& got, const std::string& label) {
  auto probs = cpu::sampling_probs(logits.data(), static_cast<uint32_t>(logits.size()), p);
  size_t exact = 0, bad = 0;
  std::string first_bad;
  for (uint32_t j = 0; j < got.size(); ++j) {
    double u = cpu::sample_uniform(p.seed, first + j);
    uint32_t want = cpu::pick(probs, u);
    if (got[j] == want) {
      ++exact;
    } else if (!cpu::agrees_at_a_cdf_step(probs, u, got[j], want) && bad++ == 0) {
      first_bad = "counter " + std::to_string(first + j) + ": device " + std::to_string(got[j]) + ", CPU " +
                  std::to_string(want);
    }
  }
  BOOST_TEST(bad == 0u, label << ": " << bad << " of " << got.size() << " draws differ from the CPU, e.g. "
                              << first_bad);
  BOOST_TEST(exact * 100 >= got.size() * 99, label << ": only " << exact << " of " << got.size() << " exact");
}

std::string describe(uint32_t vocab, const SamplingParams& p) {
  return "vocab=" + std::to_string(vocab) + " T=" + std::to_string(p.temperature) + " k=" + std::to_string(p.top_k) +
         " p=" + std::to_string(p.top_p);
}

// Upper 0.1% points of the chi-square distribution, by degrees of freedom 1..9.
constexpr double kChi2Critical001[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(sample, test::NoValidationMessages)

// Random123's known-answer vectors: the CPU Philox is the real one (the device's is checked
// against it through the draws below).
BOOST_AUTO_TEST_CASE(philox_known_answers) {
  using A4 = std::array<uint32_t, 4>;
  BOOST_TEST((cpu::philox4x32_10({0, 0, 0, 0}, {0, 0}) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((cpu::philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}) ==
              A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_TEST((cpu::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Vectors with the max first, last, in the middle, tied (lowest index wins) and all equal.
std::vector<std::pair<std::string, std::vector<float>>> argmax_cases() {
  std::vector<std::pair<std::string, std::vector<float>>> cases;
  for (uint32_t n : {1u, 7u, 1000u, 4099u, 50257u}) {
    auto x = test::random_floats(n, n);
    cases.push_back({"random n=" + std::to_string(n), x});
    auto last = x;
    last[n - 1] = 2.0f;
    cases.push_back({"last n=" + std::to_string(n), last});
    auto first = x;
    first[0] = 2.0f;
    cases.push_back({"first n=" + std::to_string(n), first});
    auto tie = x;
    tie[n / 2] = tie[n - 1] = tie[(2 * n) / 3] = 3.0f;
    cases.push_back({"tie n=" + std::to_string(n), tie});
    cases.push_back({"equal n=" + std::to_string(n), std::vector<float>(n, -0.5f)});
  }
  std::vector<float> zeros = {-0.0f, 0.0f, -1.0f, -0.0f};  // -0 == +0: the first one wins
  cases.push_back({"signed zeros", zeros});
  return cases;
}

BOOST_AUTO_TEST_CASE(argmax_lowest_index_of_max) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& [name, x] : argmax_cases()) {
      auto n = static_cast<uint32_t>(x.size());
      auto dx = test::upload(*ctx, x);
      vk::Buffer out(*ctx, 4);
      Graph g(*ctx);
      ops::argmax(g, whole(dx), whole(out), n);
      g.record();
      g.run();
      BOOST_TEST(download_ids(out, 1)[0] == cpu::argmax(x.data(), n), label << " " << name);
    }
}

// temperature 0 is argmax, whatever the filters and seed say, and the step still advances.
BOOST_AUTO_TEST_CASE(temperature_zero_is_argmax) {
  for (auto [label, ctx] : test::all_contexts())
    for (const auto& [name, x] : argmax_cases()) {
      SamplingParams p{0.0f, 5, 0.5f, 1234};
      Sampler s(*ctx, x, p);
      s.set_step({3, 9, {0, 0}});
      BOOST_TEST(s.next() == cpu::argmax(x.data(), static_cast<uint32_t>(x.size())), label << " " << name);
      auto st = s.get_step();
      BOOST_TEST((st.pos == 4u && st.rng_step == 10u), label << " " << name);
    }
}

// Each replay of one recorded graph advances pos and rng by one, leaves the reserved words
// alone, and draws what the reference draws with that counter.
BOOST_AUTO_TEST_CASE(step_advances_on_replay) {
  for (auto [label, ctx] : test::all_contexts()) {
    auto x = lm_logits(1000, 11, 2.0f);
    SamplingParams p{0.9f, 0, 1.0f, 77};
    Sampler s(*ctx, x, p);
    s.set_step({7, 100, {0xAAAAAAAA, 0xBBBBBBBB}});
    std::vector<uint32_t> got;
    for (int i = 0; i < 6; ++i) got.push_back(s.next());
    auto st = s.get_step();
    BOOST_TEST(st.pos == 13u, label);
    BOOST_TEST(st.rng_step == 106u, label);
    BOOST_TEST((st.reserved[0] == 0xAAAAAAAA && st.reserved[1] == 0xBBBBBBBB), label);
    check_against_cpu(x, p, 100, got, label + " replay");
  }
}

// Same seed: the same sequence (replayed, re-recorded, or drawn in one batch); another seed:
// another sequence.
BOOST_AUTO_TEST_CASE(same_seed_same_sequence) {
  for (auto [label, ctx] : test::all_contexts()) {
    auto x = lm_logits(1000, 5, 1.0f);
    SamplingParams p{1.0f, 100, 0.95f, 42};
    auto sequence = [&](const SamplingParams& q) {
      Sampler s(*ctx, x, q);
      std::vector<uint32_t> ids;
      for (int i = 0; i < 16; ++i) ids.push_back(s.next());
      s.set_step({0, 0, {0, 0}});
      for (int i = 0; i < 16; ++i) BOOST_TEST(s.next() == ids[i], label << " replay after reset, draw " << i);
      return ids;
    };
    auto a = sequence(p);
    BOOST_TEST(sequence(p) == a, label << " a second graph");
    BOOST_TEST(draw_many(*ctx, x, p, 0, 16) == a, label << " sample_many");
    auto q = p;
    q.seed = 43;
    BOOST_TEST(sequence(q) != a, label << " another seed");
    check_against_cpu(x, p, 0, a, label);
  }
}

// The device's choice equals the reference's for the same u, over vocabularies that are not
// multiples of any workgroup size (GPT-2's 50257 and beyond) and every filter combination.
// Each (vocabulary, filters) pair is a pipeline of its own, so the contexts split them, the
// top-k parameters at a vocabulary on one context and the others on the other, alternating
// over the vocabularies: each context's shader still meets every filter combination at a
// middling and at a large vocabulary. Both run the tiny ones (1 and 7) whole.
BOOST_AUTO_TEST_CASE(matches_cpu_for_same_u) {
  const std::vector<SamplingParams> params = {
      {1.0f, 0, 1.0f, 1},    {0.7f, 50, 1.0f, 2},   {1.3f, 0, 0.9f, 3},   {0.9f, 200, 0.95f, 4},
      {0.5f, 1, 1.0f, 5},    {2.0f, 0, 0.3f, 6},    {1.0f, 3, 0.5f, 7},   {0.05f, 0, 0.99f, 8},
  };
  const std::vector<uint32_t> vocabs = {1u, 7u, 1000u, 4099u, 50257u, 131071u};
  const auto contexts = test::all_contexts();
  for (size_t c = 0; c < contexts.size(); ++c)
    for (size_t v = 0; v < vocabs.size(); ++v)
      for (const auto& p : params) {
        const uint32_t vocab = vocabs[v];
        const bool top_k = ops::sampler_filters(p, vocab) & 2u;
        if (vocab > 7 && top_k != ((v + c) % 2 == 1)) continue;
        const auto& [label, ctx] = contexts[c];
        auto x = lm_logits(vocab, vocab + p.seed, 2.5f);
        uint32_t count = vocab > 100000 ? 8 : vocab > 5000 ? 24 : 100, first = 1000 * static_cast<uint32_t>(p.seed);
        check_against_cpu(x, p, first, draw_many(*ctx, x, p, first, count), label + " " + describe(vocab, p));
      }
}

// Logits the value-space candidates cannot split: two clusters of adjacent tiny keys and one
// huge outlier, so the search must narrow through the key space with every token listed,
// for many passes (on llvmpipe that also tests the loop-iteration budget). The threshold is
// the upper cluster: a draw from the lower one means a wrong threshold.
BOOST_AUTO_TEST_CASE(threshold_search_on_adversarial_logits) {
  constexpr uint32_t kVocab = 131071;
  const float a = 1e-30f, b = std::nextafter(a, 1.0f);
  std::vector<float> x(kVocab);
  for (uint32_t i = 0; i < kVocab; ++i) x[i] = i % 2 ? a : b;
  x[77] = 1e30f;
  uint32_t upper = static_cast<uint32_t>(std::count(x.begin(), x.end(), b));
  SamplingParams p{1e30f, upper + 1, 1.0f, 31};  // keeps the outlier and the upper cluster
  auto probs = cpu::sampling_probs(x.data(), kVocab, p);
  BOOST_TEST_REQUIRE((probs[0] > 0 && probs[1] == 0));
  for (auto [label, ctx] : test::all_contexts()) {
    check_against_cpu(x, p, 0, draw_many(*ctx, x, p, 0, 16), label + " top-k");
    SamplingParams q = p;
    q.top_p = 0.5f;  // then the nucleus: the outlier and part of the upper cluster
    check_against_cpu(x, q, 0, draw_many(*ctx, x, q, 0, 16), label + " top-k + top-p");
  }
}

// Top-k never samples outside the k best, and keeps every token tied with the k-th.
BOOST_AUTO_TEST_CASE(top_k_stays_in_the_k_best) {
  for (auto [label, ctx] : test::all_contexts()) {
    auto x = lm_logits(4099, 3, 1.0f);
    SamplingParams p{1.5f, 20, 1.0f, 9};
    auto sorted = x;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    auto got = draw_many(*ctx, x, p, 0, 1000);
    std::set<uint32_t> seen(got.begin(), got.end());
    for (uint32_t id : seen) BOOST_TEST(x[id] >= sorted[19], label << " id " << id << " is not in the top 20");
    BOOST_TEST(seen.size() >= 15u, label << " only " << seen.size() << " of the top 20 drawn");

    // Ties: three tokens at 2, four at 1, the rest below; k = 5 keeps all seven.
    std::vector<float> t = test::random_floats(100, 4, -1.0f, 0.0f);
    for (uint32_t id : {3u, 50u, 77u}) t[id] = 2.0f;
    for (uint32_t id : {10u, 20u, 60u, 99u}) t[id] = 1.0f;
    auto tied = draw_many(*ctx, t, {1.0f, 5, 1.0f, 10}, 0, 2000);
    std::set<uint32_t> tied_seen(tied.begin(), tied.end());
    BOOST_TEST((tied_seen == std::set<uint32_t>{3, 10, 20, 50, 60, 77, 99}), label << " tie at the k-th logit");
  }
}

// Top-p never samples outside the nucleus the reference computes (by sorting), alone and
// after top-k.
BOOST_AUTO_TEST_CASE(top_p_stays_in_the_nucleus) {
  for (auto [label, ctx] : test::all_contexts())
    for (const SamplingParams& p : {SamplingParams{1.0f, 0, 0.8f, 21}, SamplingParams{0.8f, 40, 0.6f, 22}}) {
      auto x = lm_logits(4099, 8, 3.0f);
      auto probs = cpu::sampling_probs(x.data(), 4099, p);
      size_t nucleus = std::count_if(probs.begin(), probs.end(), [](double v) { return v > 0; });
      BOOST_TEST_REQUIRE(nucleus > 3u);  // the test means something only if there is a choice
      auto got = draw_many(*ctx, x, p, 0, 1000);
      std::set<uint32_t> seen(got.begin(), got.end());
      for (uint32_t id : seen) BOOST_TEST(probs[id] > 0, label << " " << describe(4099, p) << " id " << id);
      BOOST_TEST(seen.size() > 3u, label << " " << describe(4099, p));
      check_against_cpu(x, p, 0, got, label + " " + describe(4099, p));
    }
}

// Top-p alone first lists the tokens within c = ln(V / (1 - p)) - 3 of the top logit (in
// units of the temperature) and searches only those lists, if the tokens below hold at most
// 1 - p of the mass. Here they hold more: one top token, a few just below it and a long tail
// of 50000 tokens 10.5 below (about 1.4 of a total of 3.5), so the search must start from the
// bottom; the nucleus takes part of the tail. The same tail at -9, inside the lists, the
// other way.
BOOST_AUTO_TEST_CASE(top_p_alone_with_a_heavy_tail_below_its_floor) {
  constexpr uint32_t kVocab = 50257;
  const SamplingParams p{1.0f, 0, 0.9f, 41};
  const float floor_gap = std::log(float(kVocab) / (1.0f - p.top_p)) - 3.0f;
  for (float tail : {-10.5f, -9.0f}) {
    BOOST_TEST_REQUIRE((tail < -floor_gap) == (tail == -10.5f));
    std::vector<float> x = test::random_floats(kVocab, 5, -30.0f, -20.0f);
    for (uint32_t i = 0; i < 50000; ++i) x[(i * 7919u) % kVocab] = tail + 1e-4f * float(i % 97);
    x[123] = 0.0f;
    for (uint32_t id : {5u, 6u, 7u}) x[id] = -1.0f;
    auto probs = cpu::sampling_probs(x.data(), kVocab, p);
    size_t nucleus = std::count_if(probs.begin(), probs.end(), [](double v) { return v > 0; });
    BOOST_TEST_REQUIRE(nucleus > 1000u);  // the threshold lies inside the tail
    BOOST_TEST_REQUIRE(nucleus < 50000u);
    for (auto [label, ctx] : test::all_contexts())
      check_against_cpu(x, p, 0, draw_many(*ctx, x, p, 0, 64), label + " tail at " + std::to_string(tail));
  }
}

// Min-p cuts after top-p: the nucleus is measured on top-k's survivors before min-p drops
// anything, and a token is drawn only if top-k, top-p and min-p all keep it (transformers'
// and llama.cpp's order). On head_and_tail_logits the nucleus reaches into the tail, so all
// 62 top and head tokens stay; a nucleus renormalised after min-p's cut keeps fewer (35 to 52),
// which the draws must leave: some land on head tokens only this order keeps. Min-p
// alone and with top-k (where the two orders agree) go through the same check.
BOOST_AUTO_TEST_CASE(min_p_cuts_after_the_nucleus) {
  auto with_min_p = [](SamplingParams p) {
    p.min_p = 0.1f;
    return p;
  };
  const std::vector<SamplingParams> params = {with_min_p({1.0f, 0, 0.8f, 51}), with_min_p({0.7f, 1000, 0.8f, 52}),
                                              with_min_p({1.3f, 0, 0.9f, 53}), with_min_p({1.0f, 0, 1.0f, 54}),
                                              with_min_p({1.0f, 40, 1.0f, 55})};
  for (uint32_t vocab : {4099u, 50257u}) {
    const auto x = test::head_and_tail_logits(vocab);
    for (const SamplingParams& p : params) {
      const std::string what = describe(vocab, p) + " min-p=0.1";
      auto probs = cpu::sampling_probs(x.data(), vocab, p);
      // The other order, which the draws must be told apart from: min-p's cut first (as -inf),
      // then the nucleus of what is left.
      const float floor = 0.0f + std::log(p.min_p);  // the top logit is 0
      auto cut = x;
      for (auto& v : cut) v = v < floor ? -INFINITY : v;
      SamplingParams plain = p;
      plain.min_p = 0;
      auto cut_first = cpu::sampling_probs(cut.data(), vocab, plain);
      auto kept = [](const std::vector<double>& q) {
        return std::count_if(q.begin(), q.end(), [](double v) { return v > 0; });
      };
      const bool differs = p.top_p < 1.0f;
      BOOST_TEST_REQUIRE(kept(probs) == (p.top_k == 40 ? 40 : 62), what << ": " << kept(probs) << " kept");
      BOOST_TEST_REQUIRE((kept(cut_first) < kept(probs)) == differs, what << ": " << kept(cut_first) << " kept");
      for (auto [label, ctx] : test::all_contexts()) {
        const uint32_t count = vocab > 5000 ? 64 : 1000;
        auto got = draw_many(*ctx, x, p, 0, count);
        size_t past_cut_first = 0;
        for (uint32_t id : got) {
          BOOST_TEST(probs[id] > 0, label << " " << what << ": token " << id << " is filtered");
          past_cut_first += cut_first[id] == 0;
        }
        if (differs)
          BOOST_TEST(past_cut_first >= count / 50, label << " " << what << ": " << past_cut_first << " of " << count
                                                   << " draws outside the nucleus taken after min-p");
        check_against_cpu(x, p, 0, got, label + " " + what);
      }
    }
  }
}

// Sampled frequencies match the (filtered, renormalised) softmax: 20000 draws, Pearson's
// chi-square below its 0.1% critical value. The seed is fixed, so the test is deterministic;
// a sampler off by even 2% of probability on one token fails it.
BOOST_AUTO_TEST_CASE(frequencies_match_softmax) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.1f, -0.3f, 1.2f, -2.0f, 0.8f, 0.0f, 1.5f};
  for (auto [label, ctx] : test::all_contexts())
    for (const SamplingParams& p : {SamplingParams{0.8f, 0, 1.0f, 2024}, SamplingParams{1.2f, 7, 0.9f, 7}}) {
      constexpr uint32_t kDraws = 20000;
      auto probs = cpu::sampling_probs(x.data(), 10, p);
      std::vector<uint32_t> counts(10, 0);
      for (uint32_t id : draw_many(*ctx, x, p, 0, kDraws)) counts.at(id)++;
      double chi2 = 0;
      int kept = 0;
      for (int i = 0; i < 10; ++i) {
        if (probs[i] == 0) {
          BOOST_TEST(counts[i] == 0u, label << " filtered token " << i << " was drawn");
          continue;
        }
        ++kept;
        double expected = probs[i] * kDraws;
        chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
      }
      BOOST_TEST_REQUIRE(kept >= 2);
      BOOST_TEST(chi2 < kChi2Critical001[kept - 1], label << " " << describe(10, p) << " chi2=" << chi2 << " df="
                                                         << kept - 1);
    }
}

// Greedy ignores min-p (the most probable token always passes it): min-p alone then needs no
// controls, so greedy keeps the argmax after the LM head and batched rows.
BOOST_AUTO_TEST_CASE(min_p_is_a_control_only_when_sampling) {
  SamplingParams p{0.0f};
  p.min_p = 0.3f;
  BOOST_TEST(!p.controls_on());
  p.temperature = 0.5f;
  BOOST_TEST(p.controls_on());
  BOOST_TEST(ops::sampler_filters(p, 100) == 9u);  // sampling + min-p
}

BOOST_AUTO_TEST_CASE(bad_params_are_rejected) {
  for (const SamplingParams& p : {SamplingParams{-1.0f}, SamplingParams{1.0f, 0, 0.0f},
                                  SamplingParams{1.0f, 0, 1.5f}, SamplingParams{std::nanf("")}}) {
    BOOST_CHECK_THROW(ops::check_sampling_params(p), UsageError);
    for (auto [label, ctx] : test::all_contexts()) BOOST_CHECK_THROW(ops::SamplerWarmUp(*ctx, 100, p), UsageError);
  }
}

// A warm-up draw still in flight (its own buffers, the same pipeline) changes nothing about
// the draws of a sampler recorded meanwhile, and leaves no validation messages.
BOOST_AUTO_TEST_CASE(warm_up_leaves_draws_unchanged) {
  for (auto [label, ctx] : test::all_contexts()) {
    auto x = lm_logits(50257, 21, 2.5f);
    SamplingParams p{0.8f, 40, 0.95f, 9};
    std::vector<uint32_t> plain, warmed;
    {
      Sampler s(*ctx, x, p);
      for (int i = 0; i < 4; ++i) plain.push_back(s.next());
    }
    {
      ops::SamplerWarmUp warm(*ctx, 50257, p);
      Sampler s(*ctx, x, p);
      for (int i = 0; i < 4; ++i) warmed.push_back(s.next());
    }
    BOOST_TEST(warmed == plain, label);
    check_against_cpu(x, p, 0, warmed, label + " after a warm-up");
  }
}

// The warm-up compiles the very pipeline a model's sampler then runs, one that appends to
// the sequence's history: recording that sampler afterwards creates no pipeline. Warming a
// different variant (one without a history) would leave generate's first token to compile
// the sampler again, a large share of a cold run on a software device.
BOOST_AUTO_TEST_CASE(warm_up_compiles_the_models_sampler) {
  const uint32_t vocab = 50001;  // no other test's, so its pipelines are new here
  const SamplingParams p{0.8f, 40, 0.95f, 9};
  for (auto [label, ctx] : test::all_contexts()) {
    const size_t before = ctx->pipelines().size();
    { ops::SamplerWarmUp warm(*ctx, vocab, p); }
    const size_t compiled = ctx->pipelines().size();
    BOOST_TEST_REQUIRE(compiled > before, label << ": the warm-up compiled nothing");
    vk::Buffer logits(*ctx, uint64_t(vocab) * 4, vk::Memory::Device, "logits");
    vk::Buffer ids(*ctx, 4, vk::Memory::Device, "ids");
    vk::Buffer step(*ctx, sizeof(StepState), vk::Memory::Device, "step");
    vk::Buffer scratch(*ctx, ops::sample_scratch_bytes(vocab), vk::Memory::Device, "scratch");
    ops::SamplingState history(*ctx, vocab, 8);
    Graph g(*ctx);
    ops::sample(g, whole(logits), whole(ids), whole(step), whole(scratch), vocab, p, "sample", &history);
    BOOST_TEST(ctx->pipelines().size() == compiled, label);
  }
}

BOOST_AUTO_TEST_SUITE_END()
