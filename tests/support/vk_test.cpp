#define GPTVK_TEST_SUPPORT_IMPL
#include "tests/support/vk_test.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "engine/vk/shader_registry.hpp"

namespace gptvk::vk {
// Generated from tests/shaders/ (tests/CMakeLists.txt): the shaders of the test-only ops.
const std::map<std::string, std::span<const uint32_t>>& test_shader_table();
}  // namespace gptvk::vk

namespace gptvk::test {

namespace {
std::unique_ptr<vk::Context> g_native, g_fallback, g_gpu, g_other_matvec, g_coopmat_emu, g_shuffles_only;

vk::ContextOptions options() {
  static const bool test_shaders_added = (vk::add_shader_table(vk::test_shader_table()), true);
  (void)test_shaders_added;
  vk::ContextOptions o;
  // GPTVK_TEST_VALIDATION=0 turns the layer off (for timing runs only; CI keeps it on).
  const char* v = std::getenv("GPTVK_TEST_VALIDATION");
  o.validation = !(v && std::string(v) == "0");
  o.pipeline_cache = false;
  return o;
}
}  // namespace

vk::Context& context() {
  if (!g_native) g_native = std::make_unique<vk::Context>(options());
  return *g_native;
}

namespace {
// The test device with the limits of GPTVK_FORCE spec `forced`, made on first use.
vk::Context& forced_context(std::unique_ptr<vk::Context>& slot, const char* forced) {
  if (!slot) {
    auto o = options();
    o.forced = vk::ForcedLimits::parse(forced);
    slot = std::make_unique<vk::Context>(o);
  }
  return *slot;
}
}  // namespace

vk::Context& fallback_context() { return forced_context(g_fallback, "no_fp16,no_subgroup,shared=16K,max_range=64M"); }

vk::Context& gpu_paths_context() { return forced_context(g_gpu, "gpu"); }

vk::Context& coopmat_emu_context() { return forced_context(g_coopmat_emu, "gpu,coopmat_emu"); }

bool can_emulate_coopmat(vk::Context& ctx) { return ctx.caps().fp16_arithmetic && ctx.caps().subgroup_arithmetic; }
const char* const kCannotEmulateCoopmat = "has no f16 arithmetic or subgroup operations, which the emulation needs";

vk::Context& shuffles_only_context() { return forced_context(g_shuffles_only, "no_subgroup_arithmetic"); }

vk::Context& other_matvec_context() {
  return forced_context(g_other_matvec, context().caps().column_split_matvec ? "matvec=rows" : "matvec=cols");
}

std::vector<std::pair<std::string, vk::Context*>> all_contexts() {
  return {{"native", &context()}, {"fallback", &fallback_context()}};
}

std::vector<std::pair<std::string, vk::Context*>> native_and_gpu_contexts() {
  return {{"native", &context()}, {"gpu paths", &gpu_paths_context()}};
}

void release_contexts() {
  g_native.reset();
  g_fallback.reset();
  g_gpu.reset();
  g_other_matvec.reset();
  g_coopmat_emu.reset();
  g_shuffles_only.reset();
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> rounded_to(const std::vector<float>& v, DType dt) {
  if (dt == DType::F32) return v;
  std::vector<char> stored(v.size() * dtype_bytes(dt));
  convert(v.data(), DType::F32, stored.data(), dt, v.size());
  std::vector<float> back(v.size());
  convert(stored.data(), dt, back.data(), DType::F32, v.size());
  return back;
}

std::vector<float> lm_logits(uint32_t vocab, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(vocab);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> head_and_tail_logits(uint32_t vocab) {
  std::vector<float> x(vocab, -20.0f);
  // Ids spread over the vocabulary, so every invocation's chunk holds some of each kind.
  for (uint32_t j = 0; j < 3000; ++j) x[(j * 7919u + 5u) % vocab] = -3.0f - 0.5f * float(j % 50) / 50.0f;
  for (uint32_t i = 0; i < 61; ++i) x[(i * 65537u + 11u) % vocab] = -0.5f - 1.5f * float(i) / 60.0f;
  x[vocab / 2] = 0.0f;
  return x;
}

vk::Buffer upload(vk::Context& ctx, const std::vector<float>& data) {
  return upload_bytes(ctx, data.data(), data.size() * sizeof(float));
}

vk::Buffer upload_bytes(vk::Context& ctx, const void* data, size_t bytes) {
  vk::Buffer b(ctx, bytes, vk::Memory::Device, "test input");
  b.upload(data, bytes);
  return b;
}

std::vector<float> download(const vk::Buffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}

double max_abs_error(const std::vector<float>& got, const std::vector<float>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = std::fabs(double(got[i]) - double(want[i]));
    if (std::isnan(d)) return INFINITY;
    e = std::max(e, d);
  }
  return e;
}

double max_rel_error(const std::vector<float>& got, const std::vector<float>& want, double floor) {
  double scale = floor;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  return max_abs_error(got, want) / scale;
}

NoValidationMessages::NoValidationMessages()
    : start_native(context().validation_messages()), start_fallback(fallback_context().validation_messages()) {}

NoValidationMessages::~NoValidationMessages() {
  BOOST_CHECK_MESSAGE(context().validation_messages() == start_native,
                      "validation layer reported: " << context().last_validation_message());
  BOOST_CHECK_MESSAGE(fallback_context().validation_messages() == start_fallback,
                      "validation layer reported: " << fallback_context().last_validation_message());
}

}  // namespace gptvk::test
