#include "models/gpt_model.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "engine/error.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/copy_rows.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/embed.hpp"
#include "engine/ops/layernorm.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"

namespace gptvk {

namespace {

// The first `rows` rows of a [*][cols] float buffer.
View rows_of(const vk::Buffer& b, uint32_t rows, uint32_t cols) { return View{&b, 0, uint64_t(rows) * cols * 4}; }

View none() { return View{}; }

View maybe(const vk::Buffer& b) { return b.empty() ? View{} : whole(b); }

}  // namespace

GptModel::GptModel(vk::Context& ctx, ModelConfig cfg, ModelWeights weights, uint32_t max_chunk)
    : GptModel(ctx, std::move(cfg), std::make_shared<ModelWeights>(std::move(weights)), max_chunk) {}

GptModel::GptModel(vk::Context& ctx, ModelConfig cfg, std::shared_ptr<ModelWeights> weights, uint32_t max_chunk)
    : ctx_(ctx),
      cfg_(std::move(cfg)),
      weights_(std::move(weights)),
      w_(*weights_),
      max_chunk_(std::min(max_chunk, cfg_.context_length)) {
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
  const uint64_t cache_bytes = ops::kv_cache_bytes(attention_shape());
  for (uint32_t l = 0; l < cfg_.n_layers; ++l) {
    k_cache_.emplace_back(ctx, cache_bytes, vk::Memory::Device, "key cache");
    v_cache_.emplace_back(ctx, cache_bytes, vk::Memory::Device, "value cache");
    k_cache_.back().try_create_texel_view();
    v_cache_.back().try_create_texel_view();
  }
  bool foldable = true;
  for (const LayerWeights& L : w_.layers)
    foldable = foldable && ops::norm_before_fits(L.qkv, 1) && ops::norm_before_fits(L.fc, 1);
  if (cfg_.final_norm) foldable = foldable && ops::norm_before_fits(w_.lm_head(), 1);
  plan_ = make_plan(ctx, {cfg_.norm_position == NormPosition::Pre, cfg_.n_layers, foldable, max_chunk_,
                          attention_shape()});
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
  // The plan's tiled prompt attention: its scores scratch, where these buffers' views can
  // run it (texel views of them all).
  if (plan_.tiled_prompt_attention) {
    const ops::AttentionShape shape = attention_shape();
    scores_ = vk::Buffer(ctx, ops::attention_tiled_scratch_bytes(shape, max_chunk_), vk::Memory::Device,
                         "attention scores");
    scores_.try_create_texel_view();
    plan_.tiled_prompt_attention =
        cfg_.n_layers > 0 &&
        ops::attention_tiled_ok(ctx, whole(qkv_), whole(k_cache_[0]), whole(v_cache_[0]), whole(scores_), shape);
  }
}

GptModel::~GptModel() = default;

void GptModel::set_sampling(const ops::SamplingParams& params) {
  ops::check_sampling_params(params);
  sampling_ = params;
  for (auto it = graphs_.begin(); it != graphs_.end();)
    it = std::get<1>(it->first) == Head::LastSample ? graphs_.erase(it) : std::next(it);
}

Graph& GptModel::graph(uint32_t T, Head head) {
  auto key = std::make_tuple(T, head);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) it = graphs_.emplace(key, build_graph(T, head)).first;
  return *it->second;
}

// The whole model as a graph for a step of T tokens. Everything the config decides
// (pre/post norm, activation, biases, tying, final norm) is decided here, once.
// The state one build_graph call shares between its steps: the graph being recorded, the
// step's views and the plan's choices for this T and head.
struct GptModel::GraphBuild {
  GraphBuild(GptModel& m, uint32_t T, Head head)
      : m(m), cfg(m.cfg_), w(m.w_), g(std::make_unique<Graph>(m.ctx_)), T(T), head(head), n(T),
        C(cfg.emb_dim), eps(cfg.norm_eps), shape(m.attention_shape()),
        x(rows_of(m.x_, T, C)), h(rows_of(m.h_, T, C)), qkv(rows_of(m.qkv_, T, 3 * C)),
        att(rows_of(m.att_, T, C)), ff(rows_of(m.ff_, T, cfg.ffn_dim)), ids(whole(m.ids_)), step(whole(m.step_)),
        pre(cfg.norm_position == NormPosition::Pre),
        act{cfg.activation, false},
        counter_stride(m.ctx_.caps().storage_offset_alignment),
        // Where a step needs the logits of its last position only (or none: a chunk that
        // fills the KV cache), its last layer computes keys and values for every position
        // and the rest for the last one alone, as llama.cpp does: that position's query and
        // residual rows move to row 0, and the layer goes on with one row. GPT-2 small: 9 of
        // the 144 C^2-sized products of the layers' GEMMs left out, prefill +7-8% on lavapipe
        // at 128 and 992 tokens (f16, A/B in the same minutes). Which steps do it:
        // ExecutionPlan::last_row_only.
        last_row_only(head != Head::AllLogits && cfg.n_layers > 0 && m.plan_.last_row_only(T)),
        // With folded LayerNorms (the plan's, one token) the linears after a pre-LN
        // LayerNorm normalise the residual stream x themselves (after_norm).
        fold(m.plan_.fold_norms && T == 1) {}

  GptModel& m;
  const ModelConfig& cfg;
  ModelWeights& w;
  std::unique_ptr<Graph> g;
  const uint32_t T;
  const Head head;
  uint32_t n;  // rows past attention: T, or 1 in a last_row_only step's last layer
  const uint32_t C;
  const float eps;
  const ops::AttentionShape shape;
  const View x, h, qkv, att, ff, ids, step;
  const bool pre;
  const ops::LinearEpilogue plain{}, residual{Activation::None, true}, act;
  const uint64_t counter_stride;
  const bool last_row_only, fold;

  // Every LayerNorm that follows a residual add goes to the linear that does the add
  // (ops::NormAfter): for one token on CPU devices its last workgroup computes it, saving
  // the norm a dispatch; counter `site` is that dispatch's own (offsets stay aligned).
  ops::NormAfter norm_after(View gamma, View beta, View out, uint32_t site, const std::string& name) const {
    return ops::NormAfter{gamma, beta, out, View{&m.arrival_counters_, site * counter_stride, 4}, eps, name};
  }

  // The linears after attention, on `rows` rows: T, or the last row alone (rows = 1 < T).
  void linear(View in, const Matrix& W, View bias, View y, uint32_t rows, ops::LinearEpilogue ep, View r,
              const std::string& name, const ops::NormAfter* norm = nullptr) {
    ops::linear_with(*g, in, W, bias, y, rows,
                     {.kernel = m.plan_.linear_kernel(m.ctx_, T, rows, W, in), .ep = ep, .r = r, .name = name,
                      .norm_after = norm});
  }

  // A linear after a pre-LN LayerNorm (qkv, fc, the LM head) reads h, which the linear
  // before it normalised (ops::NormAfter); with folded LayerNorms it reads x and normalises
  // it itself, its bias folded into the shift of folded_[site], and nothing writes h.
  void after_norm(size_t site, View gamma, const Matrix& W, View bias, View y, uint32_t rows,
                  ops::LinearEpilogue ep, const std::string& name) {
    if (!fold) return linear(h, W, bias, y, rows, ep, none(), name);
    const ops::NormBefore ln{gamma, whole(m.folded_[site].row_gamma), eps};
    ops::linear_with(*g, x, W, whole(m.folded_[site].shift), y, rows, {.ep = ep, .name = name, .norm_before = &ln});
  }

  // Token and position embeddings into x; a pre-LN model's first LayerNorm into h.
  void embed() {
    ops::embed(*g, ids, step, w.tok_emb, w.pos_emb, x, T, "embed");
    if (pre && cfg.n_layers > 0 && !fold)
      ops::layernorm(*g, x, whole(w.layers[0].ln1_g), whole(w.layers[0].ln1_b), h, T, C, eps, "L0.ln1");
  }

  // Attention of layer l's T queries; returns how many rows go on past it (0: none).
  uint32_t attend(uint32_t l, const std::string& p) {
    const View k_cache = whole(m.k_cache_[l]), v_cache = whole(m.v_cache_[l]);
    if (!last_row_only || l + 1 < cfg.n_layers) {
      ops::kv_append_attention(*g, qkv, step, k_cache, v_cache, att, T, shape, p + "attention", maybe(m.scores_));
      return T;
    }
    ops::kv_append(*g, qkv, step, k_cache, v_cache, T, shape, p + "attention.kv_append");
    if (head == Head::KvOnly) return 0;
    ops::copy_rows(*g, qkv, rows_of(m.qkv_, 1, 3 * C), T - 1, 1, 3 * C, p + "last_qkv");
    ops::copy_rows(*g, x, rows_of(m.x_, 1, C), T - 1, 1, C, p + "last_x");
    const View last_step = whole(m.step_last_);  // its pos: the last token's
    if (m.plan_.tiled_attention(T))
      ops::attention_tiled(*g, qkv, last_step, k_cache, v_cache, whole(m.scores_), att, 1, shape, p + "attention");
    else
      ops::attention(*g, qkv, last_step, k_cache, v_cache, att, 1, shape, p + "attention");
    return 1;
  }

  // GPT-2: x = x + attn(LN1(x)); x = x + mlp(LN2(x)). Each LayerNorm rides on the linear
  // before it: LN2 on attn_out, LN1 of the next layer (or the final norm) on proj. Returns
  // false where nothing past the KV cache is needed.
  bool pre_ln_layer(uint32_t l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "L" + std::to_string(l) + ".";
    after_norm(2 * l, whole(L.ln1_g), L.qkv, whole(L.qkv_b), qkv, T, plain, p + "qkv");
    if ((n = attend(l, p)) == 0) return false;
    const auto ln2 = norm_after(whole(L.ln2_g), whole(L.ln2_b), h, 2 * l, p + "ln2");
    linear(att, L.attn_out, whole(L.attn_out_b), x, n, residual, x, p + "attn_out", fold ? nullptr : &ln2);
    after_norm(2 * l + 1, whole(L.ln2_g), L.fc, whole(L.fc_b), ff, n, act, p + "fc");
    std::optional<ops::NormAfter> next;  // none when folded: the next linear normalises x
    if (!fold && l + 1 < cfg.n_layers) {
      const LayerWeights& N = w.layers[l + 1];
      next = norm_after(whole(N.ln1_g), whole(N.ln1_b), h, 2 * l + 1, "L" + std::to_string(l + 1) + ".ln1");
    } else if (!fold && cfg.final_norm) {
      next = norm_after(whole(w.lnf_g), whole(w.lnf_b), h, 2 * l + 1, "ln_f");
    }
    linear(ff, L.proj, whole(L.proj_b), x, n, residual, x, p + "proj", next ? &*next : nullptr);
    return true;
  }

  // Original Transformer / GPT-1: x = LN1(x + attn(x)); x = LN2(x + mlp(x)).
  bool post_ln_layer(uint32_t l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "L" + std::to_string(l) + ".";
    ops::linear(*g, x, L.qkv, whole(L.qkv_b), qkv, T, plain, none(), p + "qkv");
    if ((n = attend(l, p)) == 0) return false;
    const auto ln1 = norm_after(whole(L.ln1_g), whole(L.ln1_b), x, 2 * l, p + "ln1");
    linear(att, L.attn_out, whole(L.attn_out_b), h, n, residual, x, p + "attn_out", &ln1);
    linear(x, L.fc, whole(L.fc_b), ff, n, act, none(), p + "fc");
    const auto ln2 = norm_after(whole(L.ln2_g), whole(L.ln2_b), x, 2 * l + 1, p + "ln2");
    linear(ff, L.proj, whole(L.proj_b), h, n, residual, x, p + "proj", &ln2);
    return true;
  }

  // Final norm (or none; pre-norm models with layers had it from the last linear), then
  // the LM head over every position or only the last one, and the sampler.
  void lm_head() {
    const uint32_t V = cfg.vocab_size;
    View normed = x;
    if (cfg.final_norm) {
      if (!(pre && cfg.n_layers > 0)) ops::layernorm(*g, x, whole(w.lnf_g), whole(w.lnf_b), h, n, C, eps, "ln_f");
      normed = h;
    }
    const View head_bias = cfg.out_bias ? maybe(w.head_b) : none();
    if (fold && cfg.final_norm) {
      // One token: the LM head normalises x itself and there is only the last position.
      const View logits = head == Head::AllLogits ? rows_of(m.logits_all(), 1, V) : whole(m.logits_last_);
      after_norm(m.folded_.size() - 1, whole(w.lnf_g), w.lm_head(), head_bias, logits, 1, plain, "lm_head");
      if (head == Head::LastSample)
        ops::sample(*g, logits, ids, step, whole(m.sample_scratch_), V, m.sampling_, "sample", m.sampling_state_.get());
    } else if (head == Head::AllLogits) {
      ops::linear(*g, normed, w.lm_head(), head_bias, rows_of(m.logits_all(), T, V), T, plain, none(), "lm_head");
    } else {
      last_row_head(normed);
    }
  }

  // The LM head of the last position only (row 0 of `normed` after a last_row_only step).
  // Greedy decoding: the LM head's last workgroup picks the token where it can (CPU
  // devices), saving the sampler its dispatch.
  void last_row_head(View normed) {
    const uint32_t V = cfg.vocab_size;
    const View head_bias = cfg.out_bias ? maybe(w.head_b) : none();
    View last = normed;
    if (n > 1) {
      ops::copy_rows(*g, normed, whole(m.h_last_), n - 1, 1, C, "last_row");
      last = whole(m.h_last_);
    }
    const ops::PickAfter pick{ids, step, whole(m.pick_partials_),
                              View{&m.arrival_counters_, 2 * uint64_t(cfg.n_layers) * counter_stride, 4}};
    const bool greedy = head == Head::LastSample && m.sampling_.temperature == 0.0f && !m.sampling_.controls_on();
    const bool picked = ops::linear_with(*g, last, w.lm_head(), head_bias, whole(m.logits_last_), 1,
                                         {.ep = plain, .name = "lm_head", .pick_after = greedy ? &pick : nullptr});
    if (head == Head::LastSample && !picked)
      ops::sample(*g, whole(m.logits_last_), ids, step, whole(m.sample_scratch_), V, m.sampling_, "sample",
                  m.sampling_state_.get());
  }
};

// embed -> per layer (LayerNorm, attention, LayerNorm, MLP) -> final norm and LM head.
std::unique_ptr<Graph> GptModel::build_graph(uint32_t T, Head head) {
  GraphBuild b(*this, T, head);
  b.embed();
  for (uint32_t l = 0; l < cfg_.n_layers; ++l)
    if (!(b.pre ? b.pre_ln_layer(l) : b.post_ln_layer(l))) break;  // nothing past the KV cache
  if (head != Head::KvOnly) b.lm_head();
  b.g->record(profile_);
  return std::move(b.g);
}

vk::Buffer& GptModel::logits_all() {
  if (logits_all_.empty())
    logits_all_ = vk::Buffer(ctx_, uint64_t(max_chunk_) * cfg_.vocab_size * 4, vk::Memory::Device,
                             "logits of every position");
  return logits_all_;
}

Graph& GptModel::run(uint32_t T, Head head) {
  if (plan_.fold_norms && T == 1 && !folded_ready_) compute_folded_norms();
  Graph& g = graph(T, head);
  g.run();
  return g;
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
    const std::string p = "L" + std::to_string(l) + ".";
    fold(2 * l, L.qkv, L.ln1_g, L.ln1_b, whole(L.qkv_b), p + "ln1");
    fold(2 * l + 1, L.fc, L.ln2_g, L.ln2_b, whole(L.fc_b), p + "ln2");
  }
  if (cfg_.final_norm)
    fold(folded_.size() - 1, w_.lm_head(), w_.lnf_g, w_.lnf_b, cfg_.out_bias ? maybe(w_.head_b) : View{}, "ln_f");
  g.record();
  g.run();
  folded_ready_ = true;
}

void GptModel::check_ids(std::span<const uint32_t> ids, uint32_t pos) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= cfg_.vocab_size)
      throw InputError("token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                       " is out of the vocabulary (vocab_size = " + std::to_string(cfg_.vocab_size) + ")");
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
  check_ids(ids, pos);
  std::vector<float> logits;
  if (all_logits) logits.resize(ids.size() * uint64_t(cfg_.vocab_size));
  last_run_.clear();
  for (size_t done = 0; done < ids.size();) {
    uint32_t T = static_cast<uint32_t>(std::min<size_t>(max_chunk_, ids.size() - done));
    write_ids(ids.subspan(done, T), pos + static_cast<uint32_t>(done));
    last_run_.push_back(&run(T, all_logits ? Head::AllLogits : Head::KvOnly));
    if (all_logits) logits_all_.download(logits.data() + done * cfg_.vocab_size, uint64_t(T) * cfg_.vocab_size * 4);
    done += T;
  }
  pos_ = pos + static_cast<uint32_t>(ids.size());
  return logits;
}

void GptModel::run_chunks(std::span<const uint32_t> ids, uint32_t pos, Head head) {
  check_ids(ids, pos);
  const size_t first = ids.size() - std::min<size_t>(ids.size(), max_chunk_);  // tokens before the last chunk
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

uint32_t GptModel::prefill_and_sample(std::span<const uint32_t> prompt) {
  if (prompt.empty()) throw InputError("the prompt has no tokens");
  if (prompt.size() < cfg_.context_length) sampling_state_->reset(prompt);  // run_chunks rejects longer ones
  run_chunks(prompt, 0, Head::LastSample);
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
  logits_last_.download(logits.data(), logits.size() * 4);
  return logits;
}

void GptModel::warm_up(uint32_t prompt_tokens) {
  if (prompt_tokens == 0) return;
  // The graphs prefill_and_sample() will run, in that order: chunks of max_chunk_ tokens and
  // a shorter remainder, then the last chunk. Not the decode step's: on a device with one
  // queue its compilation would delay the first token (it compiles at the first
  // decode_next(), or already did for a one-token prompt, whose graph it shares).
  const uint32_t tail = std::min(prompt_tokens, max_chunk_), head = prompt_tokens - tail;
  if (head) graph(std::min(head, max_chunk_), Head::KvOnly).warm_up();
  if (head > max_chunk_ && head % max_chunk_) graph(head % max_chunk_, Head::KvOnly).warm_up();
  graph(tail, Head::LastSample).warm_up();
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
    }
  std::vector<OpTime> out;
  for (const auto& op : order) out.push_back(by_op[op]);
  return out;
}

}  // namespace gptvk
