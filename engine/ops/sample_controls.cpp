#include "engine/ops/sample_controls.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/ops/sample_shape.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

SamplingState::SamplingState(vk::Context& ctx, uint32_t vocab, uint32_t capacity)
    : ctx_(ctx),
      vocab_(vocab),
      capacity_(capacity),
      history_(ctx, (uint64_t(capacity) + 1) * 4, vk::Memory::Host, "token history"),
      counts_(ctx, uint64_t(vocab) * 4, vk::Memory::Device, "penalty counts"),
      controlled_(ctx, uint64_t(vocab) * 4, vk::Memory::Device, "controlled logits") {
  counts_.fill_zero();  // the controls pass leaves it zero again every time
  controlled_.fill_zero();
  reset({});
}

void SamplingState::reset(std::span<const uint32_t> tokens) {
  if (tokens.size() > capacity_)
    throw std::logic_error("SamplingState: " + std::to_string(tokens.size()) + " tokens exceed its capacity of " +
                           std::to_string(capacity_));
  auto* h = static_cast<uint32_t*>(history_.mapped());
  h[0] = static_cast<uint32_t>(tokens.size());
  if (!tokens.empty()) std::memcpy(h + 1, tokens.data(), tokens.size() * 4);
}

void SamplingState::append(uint32_t token) {
  auto* h = static_cast<uint32_t*>(history_.mapped());
  if (h[0] < capacity_) h[1 + h[0]++] = token;
}

std::vector<uint32_t> SamplingState::tokens() const {
  const auto* h = static_cast<const uint32_t*>(history_.mapped());
  return {h + 1, h + 1 + std::min(h[0], capacity_)};
}

View SamplingState::bias_for(const SamplingParams& p) {
  if (bias_.empty()) bias_ = vk::Buffer(ctx_, uint64_t(vocab_) * 4, vk::Memory::Host, "logit bias");
  auto* b = static_cast<float*>(bias_.mapped());
  check_logit_bias_ids(p, vocab_);
  std::fill(b, b + vocab_, 0.0f);
  for (auto [id, bias] : p.logit_bias) b[id] += bias;
  return whole(bias_);
}

void sampling_controls(Graph& g, View logits, SamplingState& state, uint32_t vocab, const SamplingParams& p,
                       const std::string& name) {
  check_sampling_params(p);
  if (!p.rewrites_logits()) return;
  if (state.vocab() != vocab) throw std::logic_error("dispatch '" + name + "': the sampling state's vocab differs");
  if (logits.size() < uint64_t(vocab) * 4) throw std::logic_error("dispatch '" + name + "': logits too small");
  const uint32_t local = sampler_shape(g.context(), vocab).local;
  const uint32_t controls = (p.penalties_on() ? 1u : 0u) | (p.logit_bias.empty() ? 0u : 2u);
  const auto& pipe = g.context().pipelines().get({"sample_controls", {local, vocab, controls}, 5, 16});
  const uint32_t last_n = p.repeat_last_n < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(p.repeat_last_n);
  // Bound even when that stage is off (the placeholder is never read then).
  const View bias = p.logit_bias.empty() ? g.scratch(16) : state.bias_for(p);
  g.add({name,
         &pipe,
         {{logits, Access::Read},
          {state.controlled(), Access::ReadWrite},
          {state.history(), Access::Read},
          {state.counts(), Access::ReadWrite},
          {bias, Access::Read}},
         {1, 1, 1},
         {vk::spec_f32(p.repeat_penalty), vk::spec_f32(p.frequency_penalty), vk::spec_f32(p.presence_penalty), last_n}});
}

}  // namespace gptvk::ops
