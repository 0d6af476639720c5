#include "engine/ops/sample.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/sample_shape.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

constexpr uint32_t kSums = 8;  // NSUM in shaders/common/sample_reduce.glsl

// One workgroup does the whole pick. CPU devices (lavapipe) run a workgroup on one thread
// as SIMD of subgroup_size lanes, so a wider workgroup adds no parallelism, only barriers:
// the workgroup is one subgroup where it can be, and every reduction is then a single
// subgroup operation. But llvmpipe (Mesa 22.3) also caps the loop iterations of one shader
// invocation at 65535 in total, over all its loops, and silently leaves any loop past the
// cap. The sampler walks an invocation's tokens at most about 35 times (the range, two
// searches of at most ~16 passes, two for the pick), so an invocation may own at most 1024
// tokens and big vocabularies get wider workgroups. GPUs get a wide workgroup so each pass
// over the vocabulary keeps many loads in flight.

constexpr uint32_t kCpuElementsPerInvocation = 1024;

uint32_t shared_bytes(uint32_t slots) { return (kSums * slots + 2 * slots + kSums) * 4; }

}  // namespace

SamplerShape sampler_shape(const vk::Context& ctx, uint32_t n) {
  const auto& caps = ctx.caps();
  uint32_t sg = std::max(caps.subgroup_size, 1u);
  SamplerShape s;
  s.subgroup = caps.subgroup_arithmetic && sg <= caps.max_workgroup_invocations;
  bool cpu = ctx.cpu_kernels();
  uint32_t need = cpu ? (n + kCpuElementsPerInvocation - 1) / kCpuElementsPerInvocation : 1;
  if (cpu) {
    s.local = std::min(std::max(sg, (need + sg - 1) / sg * sg), caps.max_workgroup_invocations);
  } else {
    // Without subgroups every invocation is a slot, so the serial slot sums stay short.
    s.local = std::min(s.subgroup ? 1024u : 128u, caps.max_workgroup_invocations);
  }
  // Partial sums: one per invocation without subgroups; with them one per subgroup, counted
  // for subgroups as small as 8 (or the reported size if smaller) in case the device runs
  // smaller ones than it reports, and exactly 1 when the workgroup is one subgroup.
  for (;;) {
    if (s.subgroup) s.local = std::max(sg, s.local / sg * sg);  // whole subgroups only
    s.slots = !s.subgroup ? s.local : s.local == sg ? 1 : s.local / std::min(sg, 8u);
    if (shared_bytes(s.slots) <= caps.shared_memory_bytes || s.local == 1 || (s.subgroup && s.local == sg)) break;
    s.local /= 2;
  }
  if (shared_bytes(s.slots) > caps.shared_memory_bytes)
    throw DeviceError("the sampler needs " + std::to_string(shared_bytes(s.slots)) +
                      " bytes of shared memory, the device has " + std::to_string(caps.shared_memory_bytes));
  if (s.local < need)
    throw DeviceError("a vocabulary of " + std::to_string(n) + " is too large for the sampler on this CPU device");
  return s;
}

void require_bytes(const View& v, uint64_t bytes, const char* what, const std::string& name) {
  if (v.size() < bytes)
    throw std::logic_error("dispatch '" + name + "': " + what + " holds " + std::to_string(v.size()) +
                           " bytes, needs " + std::to_string(bytes));
}

namespace {

// Scratch words per draw: the candidate lists of the threshold search. Entry e of invocation
// l's list sits where l's e-th own token does (l + e * local), and a list never holds more
// than the tokens its invocation owns, so vocab words suffice (rounded up, so that every
// draw's scratch starts 256-byte aligned).
uint32_t scratch_stride_words(uint32_t vocab) { return (vocab + 63) / 64 * 64; }

uint32_t bits(float f) { return vk::spec_f32(f); }

void check_vocab_and_count(uint32_t vocab, uint32_t count, const std::string& name) {
  if (vocab == 0) throw std::logic_error("dispatch '" + name + "': vocab must be at least 1");
  // A config may declare 2^24 (its largest dimension): a model the sampler cannot run.
  if (vocab >= (1u << 24))
    throw DeviceError("a vocabulary of " + std::to_string(vocab) +
                      " is too large for the sampler (at most 16777215: it counts tokens in floats)");
  if (count == 0 || count > 65535) throw std::logic_error("dispatch '" + name + "': count must be in [1, 65535]");
}

// BATCH in shaders/sample.comp.
constexpr uint32_t kModeSingle = 0, kModeMany = 1, kModeRows = 2;
// shaders/sample.comp's Params: temperature, top_k, top_p, seed (2 words), ln(min_p).
constexpr uint32_t kPushWords = 6, kPushBytes = kPushWords * 4;

// Which stages run is a specialization constant (FILTERS, sampler_filters()): the driver
// compiles only those. lavapipe's JIT of the whole sampler dominated a cold start, where
// greedy alone compiles in a small fraction of that (bench/PERFORMANCE.md, "Start to first
// token").
const vk::Pipeline& sampler_pipeline(Graph& g, uint32_t vocab, uint32_t mode, uint32_t filters, bool append) {
  SamplerShape s = sampler_shape(g.context(), vocab);
  return g.context().pipelines().get(
      {s.variant("sample"), {s.local, vocab, s.slots, mode, scratch_stride_words(vocab), filters, append ? 1u : 0u}, 5,
       kPushBytes});
}

void add_sampler(Graph& g, View logits, View ids, View step, View scratch, uint32_t vocab, uint32_t count,
                 bool batch, const SamplingParams& p, const std::string& name, SamplingState* state) {
  check_sampling_params(p);
  check_vocab_and_count(vocab, count, name);
  require_bytes(logits, uint64_t(vocab) * 4, "logits", name);
  require_bytes(ids, uint64_t(count) * 4, "ids", name);
  require_bytes(step, sizeof(StepState), "step", name);
  require_bytes(scratch, uint64_t(count) * sample_scratch_bytes(vocab), "scratch", name);
  if (p.rewrites_logits() && !state)
    throw std::logic_error("dispatch '" + name + "': logit bias and penalties need a SamplingState");
  if (state && p.rewrites_logits()) {
    sampling_controls(g, logits, *state, vocab, p, name + ".controls");
    logits = state->controlled();
  }
  // The history to append to (single draws only), else a placeholder the shader leaves alone.
  const bool append = state && !batch;
  const View history = append ? state->history() : g.scratch(16);
  const auto& pipe = sampler_pipeline(g, vocab, batch ? kModeMany : kModeSingle, sampler_filters(p, vocab), append);
  // ln(min_p) rounded to float on the host, the one value every draw adds to its top logit.
  const float log_min_p = p.min_p > 0 ? std::log(p.min_p) : 0.0f;
  std::vector<uint32_t> push = {bits(p.temperature), p.top_k, bits(p.top_p), static_cast<uint32_t>(p.seed),
                                static_cast<uint32_t>(p.seed >> 32), bits(log_min_p)};
  g.add({name,
         &pipe,
         {{logits, Access::Read},
          {ids, Access::Write},
          {step, batch ? Access::Read : Access::ReadWrite},
          {scratch, Access::ReadWrite},
          {history, append ? Access::ReadWrite : Access::Read}},
         {count, 1, 1},
         push});
}

}  // namespace

uint32_t sampler_filters(const SamplingParams& p, uint32_t vocab) {
  if (p.temperature == 0.0f) return 0u;  // greedy
  return 1u | (p.top_k > 0 && p.top_k < vocab ? 2u : 0u) | (p.top_p < 1.0f ? 4u : 0u) | (p.min_p > 0.0f ? 8u : 0u);
}

SampleRow sample_row(const SamplingParams& p, uint32_t rng_step) {
  check_sampling_params(p);
  if (p.controls_on())
    throw std::logic_error("sample_row: the sampling controls (penalties, logit bias, min-p) need sample()");
  return {p.temperature, p.top_k, p.top_p, static_cast<uint32_t>(p.seed), static_cast<uint32_t>(p.seed >> 32),
          rng_step, 0, 0};
}

void sample_rows(Graph& g, View logits, uint32_t rows, View table, View ids, View scratch, uint32_t vocab,
                 uint32_t filters, const std::string& name) {
  check_vocab_and_count(vocab, rows, name);
  // No min-p (bit 3): the table has no field for it.
  if (filters > 7u) throw std::logic_error("dispatch '" + name + "': filters has bits beyond sampling, top-k and top-p");
  // Scratch word indices (and so logit indices, which are fewer) must fit 32 bits.
  if (uint64_t(rows) * scratch_stride_words(vocab) > 0xffffffffull)
    throw std::logic_error("dispatch '" + name + "': rows * vocab too large for 32-bit indices");
  require_bytes(logits, uint64_t(rows) * vocab * 4, "logits", name);
  require_bytes(table, uint64_t(rows) * sizeof(SampleRow), "table", name);
  require_bytes(ids, uint64_t(rows) * 4, "ids", name);
  require_bytes(scratch, uint64_t(rows) * sample_scratch_bytes(vocab), "scratch", name);
  const auto& pipe = sampler_pipeline(g, vocab, kModeRows, filters, false);
  // The shader reads every row's parameters from the table; the push constants are unused
  // but the pipeline layout declares them.
  std::vector<uint32_t> push(kPushWords, 0u);
  g.add({name,
         &pipe,
         {{logits, Access::Read},
          {ids, Access::Write},
          {table, Access::Read},
          {scratch, Access::ReadWrite},
          {g.scratch(16), Access::Read}},  // the history binding, unused
         {rows, 1, 1},
         push});
}

void check_logit_bias_ids(const SamplingParams& p, uint32_t vocab) {
  for (auto [id, bias] : p.logit_bias)
    if (id >= vocab)
      throw UsageError("logit bias for token " + std::to_string(id) + ", outside the vocabulary of " +
                       std::to_string(vocab));
}

void check_sampling_params(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    throw UsageError("temperature must be a finite number >= 0 (0 = greedy), got " + std::to_string(p.temperature));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw UsageError("top-p must be in (0, 1] (1 = off), got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1)) throw UsageError("min-p must be in [0, 1] (0 = off), got " + std::to_string(p.min_p));
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0)
    throw UsageError("repeat-penalty must be a finite number > 0 (1 = off), got " + std::to_string(p.repeat_penalty));
  if (p.repeat_last_n < -1)
    throw UsageError("repeat-last-n must be -1 (the whole sequence), 0 (off) or a count, got " +
                     std::to_string(p.repeat_last_n));
  if (!std::isfinite(p.frequency_penalty) || !std::isfinite(p.presence_penalty))
    throw UsageError("frequency and presence penalties must be finite numbers");
  for (auto [id, bias] : p.logit_bias)
    if (!std::isfinite(bias)) throw UsageError("the logit bias for token " + std::to_string(id) + " is not a finite number");
}

uint64_t sample_scratch_bytes(uint32_t vocab) { return uint64_t(scratch_stride_words(vocab)) * 4; }

uint32_t sampler_rows_per_binding(const vk::Context& ctx, uint32_t vocab) {
  const uint64_t rows = ctx.caps().max_storage_buffer_range / sample_scratch_bytes(vocab);
  return static_cast<uint32_t>(std::clamp<uint64_t>(rows, 1, 65535));
}

void sample(Graph& g, View logits, View ids, View step, View scratch, uint32_t vocab, const SamplingParams& p,
            const std::string& name, SamplingState* state) {
  add_sampler(g, logits, ids, step, scratch, vocab, 1, false, p, name, state);
}

void sample_many(Graph& g, View logits, View ids, View step, View scratch, uint32_t vocab, uint32_t count,
                 const SamplingParams& p, const std::string& name) {
  add_sampler(g, logits, ids, step, scratch, vocab, count, true, p, name, nullptr);
}

SamplerWarmUp::SamplerWarmUp(vk::Context& ctx, uint32_t vocab, const SamplingParams& p)
    : logits_(ctx, uint64_t(vocab) * 4, vk::Memory::Device, "sampler warm-up logits"),
      ids_(ctx, 4, vk::Memory::Device, "sampler warm-up id"),
      step_(ctx, sizeof(StepState), vk::Memory::Device, "sampler warm-up step"),
      scratch_(ctx, sample_scratch_bytes(vocab), vk::Memory::Device, "sampler warm-up scratch") {
  // Defined contents (all-equal logits: the draw itself is trivial; the compile is the point).
  for (vk::Buffer* b : {&logits_, &ids_, &step_, &scratch_}) b->fill_zero();
  // With a state, as a model samples (it appends to its history): the pipeline variant a
  // sampler without one compiles is not the one the model then runs.
  state_ = std::make_unique<SamplingState>(ctx, vocab, 1);
  graph_ = std::make_unique<Graph>(ctx);
  sample(*graph_, whole(logits_), whole(ids_), whole(step_), whole(scratch_), vocab, p, "sampler warm-up",
         state_.get());
  graph_->record();
  graph_->submit();
}

SamplerWarmUp::~SamplerWarmUp() = default;

}  // namespace gptvk::ops
