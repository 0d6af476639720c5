// Shared test plumbing: Vulkan contexts with validation on, random data, uploads and
// error measures. Every op test runs on the device as it is and again with the fallback
// paths forced (no fp16, no subgroup arithmetic, small shared memory and binding range).
#pragma once
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/graph.hpp"
#include "engine/vk/buffer.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::test {

// The device as it is, validation on (process-wide, created on first use).
vk::Context& context();
// The same device pretending to lack fp16, subgroup arithmetic, and with 16 KiB shared
// memory and a 64 MiB binding range: exercises every fallback shader path.
vk::Context& fallback_context();
// The same device running a GPU's kernels and staging uploads (GPTVK_FORCE=gpu:
// cpu_kernels() false, the device type unchanged), on whole models where no GPU is at hand. Its validation messages are
// the caller's to check (NoValidationMessages watches the two above).
vk::Context& gpu_paths_context();
// The device as it is, but with the CPU decode mat-vec it does not choose by itself
// (GPTVK_FORCE=matvec=rows where Caps::column_split_matvec, matvec=cols elsewhere), so
// whole models cover both whichever CPU runs the tests. Validation as gpu_paths_context's.
vk::Context& other_matvec_context();
// The device with subgroup shuffles but no subgroup arithmetic (GPTVK_FORCE=
// no_subgroup_arithmetic), as some devices are. Validation as gpu_paths_context's.
vk::Context& shuffles_only_context();
// A GPU's kernels with cooperative matrices emulated (GPTVK_FORCE=gpu,coopmat_emu), so that
// the matrix-unit kernels run on any device with f16 arithmetic and subgroups. Validation as
// gpu_paths_context's.
vk::Context& coopmat_emu_context();
// Whether a device can emulate them (f16 arithmetic and subgroups), and what to say where not.
bool can_emulate_coopmat(vk::Context& ctx);
extern const char* const kCannotEmulateCoopmat;
// Both, for tests that must pass on each: {"native", ctx}, {"fallback", ctx}.
std::vector<std::pair<std::string, vk::Context*>> all_contexts();
// The device's own kernels and a GPU's: {"native", ctx}, {"gpu paths", gpu_paths_context()}.
std::vector<std::pair<std::string, vk::Context*>> native_and_gpu_contexts();

// A Boost precondition on context(): the case runs where `holds` is true of it, and shows
// as skipped elsewhere, the device named and `lacks` said of it.
template <class Holds>
boost::unit_test::precondition device_has(Holds holds, std::string lacks) {
  return boost::unit_test::precondition([holds, lacks](boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result r(holds(context()));
    if (!r) r.message() << context().info().name << " " << lacks;
    return r;
  });
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// v as the device stores it in dtype `dt` (f32, f16 or bf16), read back through the host
// conversion: what a reference must compute with.
std::vector<float> rounded_to(const std::vector<float>& v, DType dt);
// Logits shaped like a language model's: normal with the given spread, so a few tokens
// stand out over a long tail.
std::vector<float> lm_logits(uint32_t vocab, uint32_t seed, float spread);
// Logits where min-p and top-p disagree on what to measure: a top token at 0 (id vocab / 2),
// 61 "head" tokens within 2 of it, a tail of 3000 tokens 3 to 3.5 below it that holds most
// of the mass at temperatures near 1, and the rest far below. At min-p 0.1 (a floor 2.3
// below the top) and top-p 0.8 the nucleus of the whole distribution reaches into the tail,
// so min-p then keeps the 62 top and head tokens; a nucleus taken after min-p's cut would
// keep only part of the head. vocab >= 4000.
std::vector<float> head_and_tail_logits(uint32_t vocab);

vk::Buffer upload(vk::Context& ctx, const std::vector<float>& data);
vk::Buffer upload_bytes(vk::Context& ctx, const void* data, size_t bytes);
std::vector<float> download(const vk::Buffer& b, size_t n);

// max |a - b| / max(max |b|, floor): error relative to the reference's largest magnitude.
double max_rel_error(const std::vector<float>& got, const std::vector<float>& want, double floor = 1e-6);
double max_abs_error(const std::vector<float>& got, const std::vector<float>& want);

// Fails the current test if the validation layer reported anything since construction.
struct NoValidationMessages {
  NoValidationMessages();
  ~NoValidationMessages();
  uint64_t start_native, start_fallback;
};

// Destroys the shared contexts before static destruction (the validation layer's own
// statics would be gone by then).
void release_contexts();
struct ReleaseContextsAtEnd {
  void setup() {}
  void teardown() { release_contexts(); }
};

}  // namespace gptvk::test

// Each test executable is one translation unit that includes this header once.
#ifndef GPTVK_TEST_SUPPORT_IMPL
using GptvkReleaseContextsAtEnd = gptvk::test::ReleaseContextsAtEnd;
BOOST_TEST_GLOBAL_FIXTURE(GptvkReleaseContextsAtEnd);
#endif
