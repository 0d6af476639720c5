#include "tests/support/ops/add.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;

BOOST_FIXTURE_TEST_SUITE(residual_add, test::NoValidationMessages)

// Exact: one float add per element, so GPU and CPU must agree bit for bit.
BOOST_AUTO_TEST_CASE(matches_cpu_on_odd_sizes) {
  for (auto [label, ctx] : test::all_contexts())
    for (uint32_t n : {1u, 63u, 64u, 1000u, 12345u}) {
      auto a = test::random_floats(n, 1 + n), b = test::random_floats(n, 2 + n);
      auto da = test::upload(*ctx, a), db = test::upload(*ctx, b);
      vk::Buffer dy(*ctx, n * 4);
      Graph g(*ctx);
      ops::add(g, whole(da), whole(db), whole(dy), n);
      g.record();
      g.run();
      auto y = test::download(dy, n);
      std::vector<float> want(n);
      for (uint32_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
      BOOST_TEST(test::max_abs_error(y, want) == 0.0, label << " n=" << n);
    }
}

// A graph replays without re-recording, and a dependent chain gets its barriers.
BOOST_AUTO_TEST_CASE(replay_and_dependency_barriers) {
  auto& ctx = test::context();
  uint32_t n = 777;
  auto a = test::random_floats(n, 5);
  auto da = test::upload(ctx, a);
  vk::Buffer t(ctx, n * 4), u(ctx, n * 4);
  Graph g(ctx);
  ops::add(g, whole(da), whole(da), whole(t), n, "t=a+a");   // t = 2a
  ops::add(g, whole(t), whole(da), whole(u), n, "u=t+a");    // u = 3a (reads t: barrier)
  ops::add(g, whole(u), whole(u), whole(u), n, "u=u+u");     // u = 6a (in place: barrier)
  g.record();
  BOOST_TEST(g.barrier_count() == 2u);
  for (int rep = 0; rep < 3; ++rep) g.run();
  auto y = test::download(u, n);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = ((a[i] + a[i]) + a[i]) * 2.0f;
  BOOST_TEST(test::max_abs_error(y, want) == 0.0);
}

// Independent dispatches share no barrier, and both still write their results.
BOOST_AUTO_TEST_CASE(independent_ops_need_no_barrier) {
  auto& ctx = test::context();
  uint32_t n = 100;
  const auto a = test::random_floats(n, 7);
  auto da = test::upload(ctx, a);
  vk::Buffer x(ctx, n * 4), y(ctx, n * 4);
  Graph g(ctx);
  ops::add(g, whole(da), whole(da), whole(x), n);
  ops::add(g, whole(da), whole(da), whole(y), n);
  g.record();
  BOOST_TEST(g.barrier_count() == 0u);
  g.run();
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = a[i] + a[i];
  BOOST_TEST(test::max_abs_error(test::download(x, n), want) == 0.0);
  BOOST_TEST(test::max_abs_error(test::download(y, n), want) == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

// GPTVK_VALIDATION_GPU (ContextOptions::shader_checks): the layer's GPU-assisted validation
// reports a shader's read past its binding, which the plain layer cannot see and a device may
// answer with any value (here `add` over 64 floats more than b holds); an add within the
// bindings reports nothing. The instrumented shader skips the bad read.
BOOST_AUTO_TEST_CASE(shader_checks_report_a_read_past_a_binding) {
  test::context();  // adds the test shaders to the table
  vk::ContextOptions options;
  options.shader_checks = true;
  options.pipeline_cache = false;
  vk::Context ctx(options);
  constexpr uint32_t n = 1024, over = 64;
  auto da = test::upload(ctx, test::random_floats(n + over, 1)), db = test::upload(ctx, test::random_floats(n, 2));
  vk::Buffer dy(ctx, (n + over) * 4);
  for (uint32_t count : {n, n + over}) {
    const uint64_t before = ctx.validation_messages();
    Graph g(ctx);
    ops::add(g, whole(da), whole(db), whole(dy), count);
    g.record();
    g.run();
    BOOST_TEST((ctx.validation_messages() > before) == (count > n), "add over " << count);
    if (count > n) BOOST_TEST(ctx.last_validation_message().find("out of bounds") != std::string::npos);
  }
}
