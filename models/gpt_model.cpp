#include "models/gpt_model.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/error.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"
#include "models/graph_names.hpp"

namespace gptvk {

GptModel::GptModel(vk::Context& ctx, ModelConfig cfg, ModelWeights weights, uint32_t max_chunk)
    : GptModel(ctx, std::move(cfg), std::make_shared<ModelWeights>(std::move(weights)), max_chunk) {}

GptModel::GptModel(vk::Context& ctx, ModelConfig cfg, std::shared_ptr<ModelWeights> weights, uint32_t max_chunk,
                   std::shared_ptr<KvPool> kv, uint32_t slot)
    : ctx_(ctx),
      cfg_(std::move(cfg)),
      weights_(std::move(weights)),
      w_(*weights_),
      max_chunk_(std::min(max_chunk, cfg_.context_length)),
      kv_(std::move(kv)),
      kv_slot_(slot) {
  if (kv_ && kv_slot_ >= kv_->slots()) throw std::invalid_argument("GptModel: KV slot outside the pool");
  const uint64_t C = cfg_.emb_dim, F = cfg_.ffn_dim, V = cfg_.vocab_size, T = max_chunk_;
  ids_ = vk::Buffer(ctx, T * 4, vk::Memory::Host, "token ids");
  step_ = vk::Buffer(ctx, sizeof(StepState), vk::Memory::Host, "step state");
  step_.fill_zero();
  x_ = vk::Buffer(ctx, T * C * 4, vk::Memory::Device, "residual stream");
  h_ = vk::Buffer(ctx, T * C * 4, vk::Memory::Device, "normalized activations");
  h_last_ = vk::Buffer(ctx, C * 4, vk::Memory::Device, "last position");
  step_last_ = vk::Buffer(ctx, sizeof(StepState), vk::Memory::Host, "step state of the last position");
  step_last_.fill_zero();
  qkv_ = vk::Buffer(ctx, T * 3 * C * 4, vk::Memory::Device, "q/k/v");
  att_ = vk::Buffer(ctx, T * C * 4, vk::Memory::Device, "attention output");
  ff_ = vk::Buffer(ctx, T * F * 4, vk::Memory::Device, "feed-forward activations");
  logits_last_ = vk::Buffer(ctx, V * 4, vk::Memory::Device, "logits");
  step_logits_ = whole(logits_last_);
  // Inputs of linear layers: CPU devices read them through texel views (engine/ops/linear.hpp).
  for (vk::Buffer* b : {&x_, &h_, &h_last_, &att_, &ff_}) b->try_create_texel_view();
  sample_scratch_ = vk::Buffer(ctx, ops::sample_scratch_bytes(cfg_.vocab_size), vk::Memory::Device, "sampler scratch");
  sampling_state_ = std::make_unique<ops::SamplingState>(ctx, cfg_.vocab_size, cfg_.context_length);
  // Two LayerNorms per layer follow a residual add; each gets a counter (ops::NormAfter), and
  // so does the greedy pick after the LM head (ops::PickAfter), the last one.
  arrival_counters_ = vk::Buffer(ctx, (2 * uint64_t(cfg_.n_layers) + 1) * ctx.caps().storage_offset_alignment,
                                 vk::Memory::Device, "arrival counters");
  arrival_counters_.fill_zero();
  pick_partials_ = vk::Buffer(ctx, ops::pick_partials_bytes(cfg_.vocab_size), vk::Memory::Device, "pick partials");
  // Attention on CPU devices reads q/k/v and the caches through texel views too (engine/ops/attention.hpp).
  qkv_.try_create_texel_view();
  if (!kv_) kv_ = std::make_shared<KvPool>(ctx, cfg_.n_layers, attention_shape(), 1);  // a cache of its own
  bool foldable = true;
  for (const LayerWeights& L : w_.layers)
    foldable = foldable && ops::norm_before_fits(L.qkv) && ops::norm_before_fits(L.fc);
  if (cfg_.final_norm) foldable = foldable && ops::norm_before_fits(w_.lm_head());
  plan_ = make_plan(ctx, {cfg_.norm_position == NormPosition::Pre, cfg_.n_layers, foldable, max_chunk_,
                          attention_shape(), cfg_.dtype != DType::F32});
  if (plan_.fold_norms) {
    auto site = [&](uint64_t rows) {
      return FoldedNorm{vk::Buffer(ctx, rows * 4, vk::Memory::Device, "folded LayerNorm: W gamma"),
                        vk::Buffer(ctx, rows * 4, vk::Memory::Device, "folded LayerNorm: W beta + b")};
    };
    for (const LayerWeights& L : w_.layers) {
      folded_.push_back(site(L.qkv.rows));
      folded_.push_back(site(L.fc.rows));
    }
    if (cfg_.final_norm) folded_.push_back(site(V));
  }
  // The plan's tiled prompt attention needs texel views of these buffers, which only exist
  // once they are made: the plan is kept where they can run it and withdrawn here where
  // they cannot, so that plan() is what runs (the one choice the plan leaves to the model).
  if (plan_.tiled_prompt_attention) {
    const ops::AttentionShape shape = attention_shape();
    scores_ = vk::Buffer(ctx, ops::attention_tiled_scratch_bytes(shape, max_chunk_), vk::Memory::Device,
                         "attention scores");
    scores_.try_create_texel_view();
    plan_.tiled_prompt_attention =
        cfg_.n_layers > 0 &&
        ops::attention_tiled_ok(ctx, whole(qkv_), k_cache(0), v_cache(0), whole(scores_), shape);
  }
}

GptModel::~GptModel() = default;

void GptModel::set_sampling(const ops::SamplingParams& params) {
  ops::check_sampling_params(params);
  sampling_ = params;
  ++sampling_version_;
  for (auto it = graphs_.begin(); it != graphs_.end();)
    it = std::get<1>(it->first) == Head::LastSample ? graphs_.erase(it) : std::next(it);
}

Graph& GptModel::graph(uint32_t T, Head head, uint32_t logits_from) {
  auto key = std::make_tuple(T, head, logits_from);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) it = graphs_.emplace(key, build_graph(T, head, nullptr, logits_from)).first;
  return *it->second;
}

vk::Buffer& GptModel::logits_all() {
  if (logits_all_.empty())
    logits_all_ = vk::Buffer(ctx_, uint64_t(max_chunk_) * cfg_.vocab_size * 4, vk::Memory::Device,
                             "logits of every position");
  return logits_all_;
}

Graph& GptModel::run(uint32_t T, Head head, uint32_t logits_from) {
  if (T == 1) ensure_folded_norms();
  step_logits_ = whole(logits_last_);
  Graph& g = graph(T, head, logits_from);
  g.run();
  return g;
}

void GptModel::ensure_folded_norms() {
  if (plan_.fold_norms && !folded_ready_) compute_folded_norms();
}

// W gamma and W beta + b of every folded LayerNorm, by the linear op itself: one graph, run once.
void GptModel::compute_folded_norms() {
  Graph g(ctx_);
  const ops::LinearEpilogue plain{};
  auto fold = [&](size_t site, const Matrix& W, const vk::Buffer& gamma, const vk::Buffer& beta, View bias,
                  const std::string& name) {
    ops::linear(g, whole(gamma), W, View{}, whole(folded_[site].row_gamma), 1, plain, View{}, name + ".W_gamma");
    ops::linear(g, whole(beta), W, bias, whole(folded_[site].shift), 1, plain, View{}, name + ".W_beta");
  };
  for (uint32_t l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    const std::string p = layer_prefix(l);
    fold(2 * l, L.qkv, L.ln1_g, L.ln1_b, whole(L.qkv_b), p + "ln1");
    fold(2 * l + 1, L.fc, L.ln2_g, L.ln2_b, whole(L.fc_b), p + "ln2");
  }
  if (cfg_.final_norm)
    fold(folded_.size() - 1, w_.lm_head(), w_.lnf_g, w_.lnf_b, view_or_none(w_.head_b), "ln_f");
  g.record();
  g.run();
  folded_ready_ = true;
}

void check_token_ids(std::span<const uint32_t> ids, uint32_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab)
      throw InputError("token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                       " is out of the vocabulary (vocab_size = " + std::to_string(vocab) + ")");
}

void GptModel::check_ids(std::span<const uint32_t> ids, uint32_t pos) const {
  check_token_ids(ids, cfg_.vocab_size);
  if (uint64_t(pos) + ids.size() > cfg_.context_length)
    throw InputError(std::to_string(pos + ids.size()) + " tokens exceed the model's context of " +
                     std::to_string(cfg_.context_length) + " tokens");
}

void GptModel::write_ids(std::span<const uint32_t> ids, uint32_t pos) {
  std::memcpy(ids_.mapped(), ids.data(), ids.size() * 4);
  auto* s = static_cast<StepState*>(step_.mapped());
  s->pos = pos;
  static_cast<StepState*>(step_last_.mapped())->pos = pos + static_cast<uint32_t>(ids.size()) - 1;
}

std::vector<float> GptModel::prefill(std::span<const uint32_t> ids, uint32_t pos, bool all_logits) {
  return prefill_logits_from(ids, pos, all_logits ? 0 : ids.size());
}

bool GptModel::row_aligned(uint32_t row, uint32_t cols) const {
  return uint64_t(row) * cols * 4 % ctx_.caps().storage_offset_alignment == 0;
}

bool GptModel::burst_row_attention(uint32_t len) const {
  return cfg_.n_layers > 0 && !plan_.coopmat_attention(len) && !plan_.last_row_only(len) &&
         ops::steps_match_rows(ctx_, whole(qkv_), k_cache(0), v_cache(0), scores_.empty() ? View{} : whole(scores_), len,
                               attention_shape());
}

uint32_t GptModel::aligned_logit_row(uint32_t want) const {
  while (want > 0 && !row_aligned(want, cfg_.emb_dim)) --want;
  return want;
}

std::vector<float> GptModel::prefill_logits_from(std::span<const uint32_t> ids, uint32_t pos, size_t first) {
  check_ids(ids, pos);
  const uint64_t V = cfg_.vocab_size;
  std::vector<float> logits(first < ids.size() ? (ids.size() - first) * V : 0);
  last_run_.clear();
  for (size_t done = 0; done < ids.size();) {
    const uint32_t T = static_cast<uint32_t>(std::min<size_t>(max_chunk_, ids.size() - done));
    write_ids(ids.subspan(done, T), pos + static_cast<uint32_t>(done));
    if (done + T <= first) {
      last_run_.push_back(&run(T, Head::KvOnly));
    } else {
      // Rows [from, T) of this chunk are wanted; the LM head starts at an aligned row at or
      // before `from`, and the rows it computes before `from` are not read back.
      const uint32_t from = static_cast<uint32_t>(first > done ? first - done : 0), head0 = aligned_logit_row(from);
      last_run_.push_back(&run(T, Head::AllLogits, head0));
      logits_all_.download(logits.data() + (done + from - first) * V, (T - from) * V * 4, (from - head0) * V * 4);
    }
    done += T;
  }
  pos_ = pos + static_cast<uint32_t>(ids.size());
  return logits;
}

void GptModel::run_chunks(std::span<const uint32_t> ids, uint32_t pos, Head head) {
  check_ids(ids, pos);
  const size_t first = chunks_before_last(ids.size());  // tokens before the last chunk
  // The profile covers this call's graphs only: the earlier chunks' (prefill() sets them)
  // and the last one's, never a previous step's.
  std::vector<Graph*> runs;
  if (first) {
    prefill(ids.first(first), pos, false);
    runs = last_run_;
  }
  auto last = ids.subspan(first);
  write_ids(last, pos + static_cast<uint32_t>(first));
  if (head == Head::LastSample) static_cast<StepState*>(step_.mapped())->rng_step = 0;
  runs.push_back(&run(static_cast<uint32_t>(last.size()), head));
  last_run_ = runs;
  pos_ = pos + static_cast<uint32_t>(ids.size());
}

std::vector<float> GptModel::last_logits(std::span<const uint32_t> ids, uint32_t pos) {
  if (ids.empty()) throw InputError("no tokens to run");
  run_chunks(ids, pos, Head::LastLogits);
  std::vector<float> logits(cfg_.vocab_size);
  logits_last_.download(logits.data(), logits.size() * 4);
  return logits;
}

std::vector<float> GptModel::decode_logits(uint32_t token, uint32_t pos) {
  const uint32_t one[1] = {token};
  return last_logits(one, pos);
}

uint32_t GptModel::prefill_and_sample(std::span<const uint32_t> prompt) { return sample_after_prefill(prompt, 0); }

size_t GptModel::chunks_before_last(size_t n) const { return n ? (n - 1) / max_chunk_ * max_chunk_ : 0; }

std::vector<std::pair<uint32_t, uint32_t>> GptModel::prompt_chunks(size_t n) const {
  // As run_chunks splits them: max_chunk_ tokens at a time from position 0, the last chunk
  // the rest (1 to max_chunk_ tokens). Chunks that start at multiples of max_chunk_ make a
  // prompt's first chunks those of every longer prompt that begins with them, so a slot
  // that ran one can keep their keys and values for the other (reuse_prompt_prefix).
  const uint32_t first = static_cast<uint32_t>(chunks_before_last(n));
  std::vector<std::pair<uint32_t, uint32_t>> chunks;
  for (uint32_t b = 0; b < first; b += max_chunk_) chunks.emplace_back(b, b + max_chunk_);
  chunks.emplace_back(first, static_cast<uint32_t>(n));
  return chunks;
}

void GptModel::reuse_prompt_prefix(uint32_t tokens) {
  if (tokens % max_chunk_ || tokens >= cfg_.context_length)
    throw std::logic_error("reuse_prompt_prefix: not a whole number of chunks inside the context");
  pos_ = tokens;
}

void GptModel::require_same_model(const GptModel& other, const char* what) const {
  if (other.shared_weights() != shared_weights() || other.max_chunk_ != max_chunk_ || &other.ctx_ != &ctx_)
    throw std::logic_error(std::string(what) + ": another model's weights, device or chunk size");
}

void GptModel::copy_prompt_prefix(const GptModel& other, uint32_t tokens) {
  require_same_model(other, "copy_prompt_prefix");
  if (tokens > other.pos_) throw std::logic_error("copy_prompt_prefix: the other model has not run those tokens");
  reuse_prompt_prefix(tokens);
  if (tokens) copy_on_device(ctx_, kv_copies_from(other, 0, tokens), attention_shape());
}

void GptModel::copy_kept_prompt(const GptModel& other, uint32_t tokens) {
  require_same_model(other, "copy_kept_prompt");
  if (tokens == 0 || tokens > cfg_.context_length || other.kept_logits_.empty())
    throw std::logic_error("copy_kept_prompt: the other model keeps no such prompt");
  const ViewCopy logits{whole(other.kept_logits_), whole(kept_logits())};
  copy_on_device(ctx_, kv_copies_from(other, 0, tokens), attention_shape(), {&logits, 1});
}

vk::Buffer& GptModel::kept_logits() {
  if (kept_logits_.empty())
    kept_logits_ = vk::Buffer(ctx_, uint64_t(cfg_.vocab_size) * 4, vk::Memory::Device, "kept first-token logits");
  return kept_logits_;
}

std::vector<KvCopy> GptModel::kv_copies_from(const GptModel& other, uint32_t begin, uint32_t end) const {
  std::vector<KvCopy> copies;
  for (uint32_t l = 0; l < cfg_.n_layers; ++l) {
    copies.push_back({other.k_cache(l), k_cache(l), begin, end});
    copies.push_back({other.v_cache(l), v_cache(l), begin, end});
  }
  return copies;
}

void GptModel::begin_last_chunk(std::span<const uint32_t> prompt, uint32_t prefilled) {
  if (prompt.empty()) throw InputError("the prompt has no tokens");
  if (prefilled >= prompt.size()) throw std::logic_error("begin_last_chunk: no tokens left to run");
  if (prefilled && pos_ != prefilled) throw std::logic_error("begin_last_chunk: the earlier chunks did not run");
  check_ids(prompt.subspan(prefilled), prefilled);
  sampling_state_->reset(prompt);
}

uint32_t GptModel::sample_after_prefill(std::span<const uint32_t> prompt, uint32_t prefilled) {
  begin_last_chunk(prompt, prefilled);
  run_chunks(prompt.subspan(prefilled), prefilled, Head::LastSample);
  static_cast<StepState*>(step_.mapped())->pos = pos_;  // the sampled token goes at the position after the prompt
  return static_cast<const uint32_t*>(ids_.mapped())[0];
}

uint32_t GptModel::decode_next() {
  if (pos_ >= cfg_.context_length)
    throw InputError("the context of " + std::to_string(cfg_.context_length) + " tokens is full");
  last_run_ = {&run(1, Head::LastSample)};  // embeds ids[0] at step.pos, samples into ids[0], advances step.pos
  ++pos_;
  return static_cast<const uint32_t*>(ids_.mapped())[0];
}

std::vector<float> GptModel::last_step_logits() const {
  std::vector<float> logits(cfg_.vocab_size);
  step_logits_.buffer->download(logits.data(), logits.size() * 4, step_logits_.offset);
  return logits;
}

void GptModel::took_batch_sample(uint32_t token) {
  static_cast<uint32_t*>(ids_.mapped())[0] = token;
  auto* s = static_cast<StepState*>(step_.mapped());
  ++s->pos;
  ++s->rng_step;
  sampling_state_->append(token);
}

void GptModel::warm_up(uint32_t prompt_tokens) {
  if (prompt_tokens == 0) return;
  // The graphs prefill_and_sample() will run, in that order: chunks of max_chunk_ tokens,
  // then the last chunk. Not the decode step's: on a device with one queue its compilation
  // would delay the first token (it compiles at the first decode_next(), or already did for
  // a one-token prompt, whose graph it shares).
  const uint32_t head = static_cast<uint32_t>(chunks_before_last(prompt_tokens));
  if (head) graph(max_chunk_, Head::KvOnly).warm_up();
  graph(prompt_tokens - head, Head::LastSample).warm_up();
}

std::vector<OpTime> GptModel::profile_summary() const {
  // "L7.fc" and "L0.fc" add up under "fc".
  std::map<std::string, OpTime> by_op;
  std::vector<std::string> order;
  for (const Graph* g : last_run_)
    for (const auto& t : g->timings()) {
      auto dot = t.name.find('.');
      std::string op = (t.name[0] == 'L' && dot != std::string::npos) ? t.name.substr(dot + 1) : t.name;
      auto [it, added] = by_op.try_emplace(op, OpTime{op, 0.0, 0});
      if (added) order.push_back(op);
      it->second.ms += t.ms;
      it->second.dispatches += t.dispatches;
      it->second.weight_bytes += t.weight_bytes;
      it->second.flops += t.flops;
    }
  std::vector<OpTime> out;
  for (const auto& op : order) out.push_back(by_op[op]);
  return out;
}

std::vector<std::unique_ptr<GptModel>> make_slot_models(vk::Context& ctx, const ModelConfig& cfg,
                                                        std::shared_ptr<ModelWeights> weights, uint32_t n,
                                                        uint32_t max_chunk) {
  auto kv = std::make_shared<KvPool>(ctx, cfg.n_layers, attention_shape_of(cfg), n);
  std::vector<std::unique_ptr<GptModel>> models;
  for (uint32_t s = 0; s < n; ++s) models.push_back(std::make_unique<GptModel>(ctx, cfg, weights, max_chunk, kv, s));
  return models;
}

uint64_t slot_device_bytes(const vk::Context& ctx, const ModelConfig& cfg, uint32_t max_chunk) {
  const uint64_t C = cfg.emb_dim, F = cfg.ffn_dim, V = cfg.vocab_size, L = cfg.n_layers;
  const uint64_t T = std::min(max_chunk, cfg.context_length);
  const ops::AttentionShape shape = attention_shape_of(cfg);
  uint64_t bytes = 2 * L * ops::kv_cache_bytes(shape);
  uint64_t buffers = 0;  // each may round up by kAllocationRounding
  auto add = [&](uint64_t n, uint64_t each) { bytes += n * each, buffers += n; };
  add(1, T * 4);                                            // ids
  add(2, sizeof(StepState));                                // step, step_last
  add(3, T * C * 4);                                        // x, h, att; qkv below
  add(1, T * 3 * C * 4);
  add(1, T * F * 4);
  add(1, C * 4);                                            // h_last
  add(2, V * 4);                                            // logits_last, kept_logits
  add(1, T * V * 4);                                        // logits_all
  add(1, ops::sample_scratch_bytes(cfg.vocab_size));
  add(1, ops::pick_partials_bytes(cfg.vocab_size));
  add(1, (2 * L + 1) * ctx.caps().storage_offset_alignment);  // arrival counters
  add(1, (uint64_t(cfg.context_length) + 1) * 4);           // SamplingState: history
  add(3, V * 4);                                            //   counts, controlled, bias
  if (ctx.cpu_kernels()) {
    add(1, ops::attention_tiled_scratch_bytes(shape, uint32_t(T)));  // scores_
  } else {                                                  // folded LayerNorms: qkv, fc, LM head
    add(2 * L, 3 * C * 4);
    add(2 * L, F * 4);
    add(2, V * 4);
  }
  return bytes + buffers * kAllocationRounding;
}

}  // namespace gptvk
