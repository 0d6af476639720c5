// GptModel::build_graph: the one piece of code that turns a config into a graph of ops,
// for a step of T tokens of the model's own sequence, or one token each of several
// sequences (a batched decode step, models/decode_batch.hpp).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "engine/ops/attention.hpp"
#include "engine/ops/attention_coopmat.hpp"
#include "engine/ops/copy_rows.hpp"
#include "engine/ops/embed.hpp"
#include "engine/ops/layernorm.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/vk/context.hpp"
#include "models/gpt_model.hpp"
#include "models/graph_names.hpp"

namespace gptvk {

namespace {

// The first `rows` rows of a [*][cols] float buffer.
View rows_of(const vk::Buffer& b, uint32_t rows, uint32_t cols) { return View{&b, 0, uint64_t(rows) * cols * 4}; }

// Rows [first, first + rows) of a [*][cols] float buffer.
View rows_at(const vk::Buffer& b, uint32_t first, uint32_t rows, uint32_t cols) {
  return View{&b, uint64_t(first) * cols * 4, uint64_t(rows) * cols * 4};
}

View none() { return View{}; }

}  // namespace

// The state one build_graph call shares between its steps: the graph being recorded, the
// step's views and the plan's choices for this T and head.
// A batched decode step (`seqs` not empty) has one row per sequence: row b is the next
// token of seqs[b], a model over the same weights whose own buffers hold its sequence's
// state (ids, step, KV cache, sampler). The products run over all rows at once, on this
// model's activation buffers; only what belongs to one sequence goes row by row: the
// embedding at its position, attention over its KV cache, its sampler.
// A burst of prompts (`lens` not empty) has lens[b] rows for seqs[b], the last chunk of its
// prompt at its own positions: the products run over all of them at once, attention over
// each one's rows and KV cache as its own prompt step would, and from the last layer on
// only each sequence's last row goes on (gathered to row b), to the LM head and its sampler.
// A twin in a burst (lens[b] == 0, after every prompt that runs) has the prompt of an
// earlier sequence: it runs no rows, and its sampler reads that one's row of logits.
struct GptModel::GraphBuild {
  GraphBuild(GptModel& m, uint32_t T, Head head, const BatchStep& batch_step = {})
      : m(m), cfg(m.cfg_), w(m.w_), g(std::make_unique<Graph>(m.ctx_)), T(T), head(head), live_rows(T), bs(batch_step),
        seqs(bs.seqs), lens(bs.lens), twin_of(bs.twin_of), batch(!seqs.empty() && lens.empty()), burst(!lens.empty()),
        exact_rows(bs.exact_rows),
        prompts_run(static_cast<uint32_t>(std::count_if(lens.begin(), lens.end(), [](uint32_t n) { return n > 0; }))),
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
        // the 144 C^2-sized products of the layers' GEMMs left out (bench/PERFORMANCE.md,
        // "Prefill: the GEMM"). Which steps do it: ExecutionPlan::last_row_only.
        last_row_only(!batch && !burst && head != Head::AllLogits && cfg.n_layers > 0 && m.plan_.last_row_only(T)),
        // With folded LayerNorms (the plan's: one-token steps, and batched steps with exact
        // rows, which follow them) the linears after a pre-LN LayerNorm normalise the
        // residual stream x themselves (after_norm).
        fold(!burst && m.plan_.fold_norms && (batch ? exact_rows : T == 1)) {
    for (uint32_t first = 0; uint32_t len : lens) firsts.push_back(std::exchange(first, first + len));
  }

  GptModel& m;
  const ModelConfig& cfg;
  ModelWeights& w;
  std::unique_ptr<Graph> g;
  const uint32_t T;
  const Head head;
  // Rows past attention: T; 1 in a last_row_only step's last layer; prompts_run in a burst's last layer.
  uint32_t live_rows;
  const BatchStep bs;                      // a batched step's sequences and buffers
  const std::span<GptModel* const> seqs;  // a batched step's sequences
  const std::span<const uint32_t> lens;    // a burst's rows per sequence
  const std::span<const uint32_t> twin_of;  // a burst's twins: whose prompt each shares
  std::vector<uint32_t> firsts;            // a burst's first row of each sequence
  // batch: a decode step of seqs.size() rows; burst: a burst of prompts; exact_rows: each
  // row's arithmetic that of the sequence's own step (ExecutionPlan::batch_linear_kernel).
  const bool batch, burst, exact_rows;
  const uint32_t prompts_run;  // a burst's sequences with rows: seqs[0, prompts_run), the twins after
  const uint32_t C;
  const float eps;
  const ops::AttentionShape shape;
  const View x, h, qkv, att, ff, ids, step;
  const bool pre;
  const ops::LinearEpilogue plain{}, residual{Activation::None, true}, act;
  const uint64_t counter_stride;
  const bool last_row_only, fold;
  uint32_t logits_from = 0;  // AllLogits: the LM head's first row (build_graph sets it)

  // Every LayerNorm that follows a residual add goes to the linear that does the add
  // (ops::NormAfter): for one token on CPU devices its last workgroup computes it, saving
  // the norm a dispatch; counter `site` is that dispatch's own (offsets stay aligned).
  ops::NormAfter norm_after(View gamma, View beta, View out, uint32_t site, const std::string& name) const {
    return ops::NormAfter{gamma, beta, out, View{&m.arrival_counters_, site * counter_stride, 4}, eps, name};
  }

  // A product over `rows` rows: T, or the last row alone (rows = 1 < T) in a last_row_only
  // step's last layer; a batched step's go through batch_linear.
  void linear(View in, const Matrix& W, View bias, View y, uint32_t rows, ops::LinearEpilogue ep, View r,
              const std::string& name, const ops::NormAfter* norm = nullptr) {
    if (batch) return batch_linear(in, W, bias, y, ep, r, name, norm);
    ops::linear_with(*g, in, W, bias, y, rows,
                     {.kernel = m.plan_.linear_kernel(m.ctx_, T, rows, W, in), .ep = ep, .r = r, .name = name,
                      .norm_after = norm});
  }

  // A batched step's product over its T rows, and the LayerNorm after it: with exact rows,
  // in the order a one-token step's mat-vec computes it in its last workgroup where that
  // step does (ExecutionPlan::batch_norm_in_lanes).
  void batch_linear(View in, const Matrix& W, View bias, View y, ops::LinearEpilogue ep, View r,
                    const std::string& name, const ops::NormAfter* norm) {
    ops::linear_with(*g, in, W, bias, y, T,
                     {.kernel = m.plan_.batch_linear_kernel(m.ctx_, T, exact_rows, W, in), .ep = ep, .r = r, .name = name});
    if (!norm) return;
    if (exact_rows && m.plan_.batch_norm_in_lanes(m.ctx_, W, in))
      ops::layernorm_in_lanes(*g, y, norm->gamma, norm->beta, norm->out, T, W.rows, eps, norm->name);
    else
      ops::layernorm(*g, y, norm->gamma, norm->beta, norm->out, T, W.rows, eps, norm->name);
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
  // The LM head after the final LayerNorm folded in, over `rows` rows (x's first).
  void folded_head(View head_bias, View logits, uint32_t rows) {
    after_norm(m.folded_.size() - 1, whole(w.lnf_g), w.lm_head(), head_bias, logits, rows, plain, "lm_head");
  }

  // Token and position embeddings into x; a pre-LN model's first LayerNorm into h.
  void embed() {
    if (bs.row_ids.buffer) {  // every row at its own position in one dispatch
      ops::embed_rows(*g, bs.row_ids, bs.rows, w.tok_emb, w.pos_emb, x, T, "embed");
    } else if (burst) {
      for (size_t b = 0; b < prompts_run; ++b)  // each prompt at its own positions
        ops::embed(*g, whole(seqs[b]->ids_), whole(seqs[b]->step_), w.tok_emb, w.pos_emb,
                   rows_at(m.x_, firsts[b], lens[b], C), lens[b], "embed");
    } else if (batch) {
      // Each sequence's last token at its own position, to row b of x; where row b's offset
      // does not meet the device's binding alignment (C % 4 != 0), x is bound from row 0.
      for (uint32_t b = 0; b < T; ++b) {
        const bool aligned = m.row_aligned(b, C);
        ops::embed(*g, whole(seqs[b]->ids_), whole(seqs[b]->step_), w.tok_emb, w.pos_emb,
                   aligned ? rows_at(m.x_, b, 1, C) : rows_of(m.x_, b + 1, C), 1, "embed", aligned ? 0 : b);
      }
    } else {
      ops::embed(*g, ids, step, w.tok_emb, w.pos_emb, x, T, "embed");
    }
    if (pre && cfg.n_layers > 0 && !fold)
      ops::layernorm(*g, x, whole(w.layers[0].ln1_g), whole(w.layers[0].ln1_b), h, T, C, eps, "L0.ln1");
  }

  // Attention of layer l's T queries; returns how many rows go on past it (0: none).
  uint32_t attend(uint32_t l, const std::string& p) {
    if (burst) return attend_burst(l, p);
    if (batch && bs.rows.buffer) {  // every row over its own slot of the shared pool at once
      ops::kv_append_attention_rows(*g, qkv, bs.rows, m.kv_->all_keys(l), m.kv_->all_values(l), att, T, shape,
                                    p + "attention");
      return T;
    }
    if (batch) {  // each row over its own sequence's KV cache, as that sequence's one-token step does
      for (uint32_t b = 0; b < T; ++b) attend_row(l, b, p);
      return T;
    }
    const View k_cache = m.k_cache(l), v_cache = m.v_cache(l);
    if (!last_row_only || l + 1 < cfg.n_layers) {
      prompt_attention(qkv, step, k_cache, v_cache, att, T, p + "attention");
      return T;
    }
    ops::kv_append(*g, qkv, step, k_cache, v_cache, T, shape, p + "attention.kv_append");
    if (head == Head::KvOnly) return 0;
    ops::copy_rows(*g, qkv, rows_of(m.qkv_, 1, 3 * C), T - 1, 1, 3 * C, p + "last_qkv");
    ops::copy_rows(*g, x, rows_of(m.x_, 1, C), T - 1, 1, C, p + "last_x");
    last_row_attention(l, m, rows_of(m.qkv_, 1, 3 * C), rows_of(m.att_, 1, C), T, p);
    return 1;
  }

  // A prompt chunk's attention of `len` queries, appending their keys and values: on the
  // matrix units where the plan takes them, else in one dispatch (or CPU devices' tiled
  // passes through the scores scratch).
  void prompt_attention(View q, View step, View k_cache, View v_cache, View out, uint32_t len, const std::string& name) {
    if (m.plan_.coopmat_attention(len)) {
      ops::kv_append(*g, q, step, k_cache, v_cache, len, shape, name + ".kv_append");
      ops::attention_coopmat(*g, q, step, k_cache, v_cache, out, len, shape, name);
    } else {
      ops::kv_append_attention(*g, q, step, k_cache, v_cache, out, len, shape, name, view_or_none(m.scores_));
    }
  }

  // A batched step's row b over its own sequence's KV cache. Where row b's offsets in qkv
  // and att do not meet the device's binding alignment (C % 4 != 0), the row goes through
  // row 0 of the sequence's own qkv and att buffers, which nothing else uses in this step.
  void attend_row(uint32_t l, uint32_t b, const std::string& p) {
    GptModel& s = *seqs[b];
    const bool aligned = m.row_aligned(b, C) && m.row_aligned(b, 3 * C);
    const View q = aligned ? rows_at(m.qkv_, b, 1, 3 * C) : rows_of(s.qkv_, 1, 3 * C);
    const View out = aligned ? rows_at(m.att_, b, 1, C) : rows_of(s.att_, 1, C);
    if (!aligned) ops::copy_rows(*g, qkv, q, b, 1, 3 * C, p + "row_qkv");
    ops::kv_append_attention(*g, q, whole(s.step_), s.k_cache(l), s.v_cache(l), out, 1, shape, p + "attention");
    if (!aligned) ops::copy_rows(*g, out, rows_of(m.att_, b + 1, C), 0, 1, C, p + "row_att", b);
  }

  // The attention of the last of `len` tokens alone, their keys and values appended: q its
  // qkv row, out its attention row; its position in s's step_last_.
  void last_row_attention(uint32_t l, GptModel& s, View q, View out, uint32_t len, const std::string& p) {
    if (m.plan_.tiled_attention(len))
      ops::attention_tiled(*g, q, whole(s.step_last_), s.k_cache(l), s.v_cache(l), whole(m.scores_), out, 1, shape,
                           p + "attention");
    else
      ops::attention(*g, q, whole(s.step_last_), s.k_cache(l), s.v_cache(l), out, 1, shape, p + "attention");
  }

  // A burst's attention: each sequence's rows over its own KV cache, as its own prompt step
  // runs them (the last layer: its last row alone where that step does). Past the last
  // layer's attention, each sequence's last row moves to row b (its source row is at least
  // 2b + 1, as every prompt has two or more rows, so no row is overwritten before it moves).
  // With a row table, the prompts that can (GptModel::burst_row_attention) attend in one
  // dispatch over their slots of the shared pool, the others each in their own.
  uint32_t attend_burst(uint32_t l, const std::string& p) {
    const bool last = l + 1 == cfg.n_layers;
    if (bs.rows.buffer)
      ops::kv_append_attention_rows(*g, qkv, bs.rows, m.kv_->all_keys(l), m.kv_->all_values(l), att, T, shape,
                                    p + "attention");
    for (size_t b = 0; b < prompts_run; ++b) {
      GptModel& s = *seqs[b];
      const uint32_t first = firsts[b], len = lens[b], end = first + len - 1;
      if (bs.rows.buffer && m.burst_row_attention(len)) continue;
      const View q = rows_at(m.qkv_, first, len, 3 * C);
      if (last && m.plan_.last_row_only(len)) {
        ops::kv_append(*g, q, whole(s.step_), s.k_cache(l), s.v_cache(l), len, shape, p + "attention.kv_append");
        last_row_attention(l, s, rows_at(m.qkv_, end, 1, 3 * C), rows_at(m.att_, end, 1, C), len, p);
      } else {
        prompt_attention(q, whole(s.step_), s.k_cache(l), s.v_cache(l), rows_at(m.att_, first, len, C), len,
                         p + "attention");
      }
    }
    if (!last) return T;
    for (uint32_t b = 0; b < prompts_run; ++b) {
      const uint32_t end = firsts[b] + lens[b] - 1;
      ops::copy_rows(*g, att, rows_at(m.att_, b, 1, C), end, 1, C, p + "last_att");
      ops::copy_rows(*g, x, rows_at(m.x_, b, 1, C), end, 1, C, p + "last_x");
    }
    return prompts_run;
  }

  // GPT-2: x = x + attn(LN1(x)); x = x + mlp(LN2(x)). Each LayerNorm rides on the linear
  // before it: LN2 on attn_out, LN1 of the next layer (or the final norm) on proj. Returns
  // false where nothing past the KV cache is needed.
  bool pre_ln_layer(uint32_t l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = layer_prefix(l);
    after_norm(2 * l, whole(L.ln1_g), L.qkv, whole(L.qkv_b), qkv, T, plain, p + "qkv");
    if ((live_rows = attend(l, p)) == 0) return false;
    const auto ln2 = norm_after(whole(L.ln2_g), whole(L.ln2_b), h, 2 * l, p + "ln2");
    linear(att, L.attn_out, whole(L.attn_out_b), x, live_rows, residual, x, p + "attn_out", fold ? nullptr : &ln2);
    after_norm(2 * l + 1, whole(L.ln2_g), L.fc, whole(L.fc_b), ff, live_rows, act, p + "fc");
    std::optional<ops::NormAfter> next;  // none when folded: the next linear normalises x
    if (!fold && l + 1 < cfg.n_layers) {
      const LayerWeights& N = w.layers[l + 1];
      next = norm_after(whole(N.ln1_g), whole(N.ln1_b), h, 2 * l + 1, layer_prefix(l + 1) + "ln1");
    } else if (!fold && cfg.final_norm) {
      next = norm_after(whole(w.lnf_g), whole(w.lnf_b), h, 2 * l + 1, "ln_f");
    }
    linear(ff, L.proj, whole(L.proj_b), x, live_rows, residual, x, p + "proj", next ? &*next : nullptr);
    return true;
  }

  // Original Transformer / GPT-1: x = LN1(x + attn(x)); x = LN2(x + mlp(x)).
  bool post_ln_layer(uint32_t l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = layer_prefix(l);
    linear(x, L.qkv, whole(L.qkv_b), qkv, T, plain, none(), p + "qkv");
    if ((live_rows = attend(l, p)) == 0) return false;
    const auto ln1 = norm_after(whole(L.ln1_g), whole(L.ln1_b), x, 2 * l, p + "ln1");
    linear(att, L.attn_out, whole(L.attn_out_b), h, live_rows, residual, x, p + "attn_out", &ln1);
    linear(x, L.fc, whole(L.fc_b), ff, live_rows, act, none(), p + "fc");
    const auto ln2 = norm_after(whole(L.ln2_g), whole(L.ln2_b), x, 2 * l + 1, p + "ln2");
    linear(ff, L.proj, whole(L.proj_b), h, live_rows, residual, x, p + "proj", &ln2);
    return true;
  }

  // Final norm (or none; pre-norm models with layers had it from the last linear), then
  // the LM head over every position or only the last one, and the sampler.
  void lm_head() {
    const uint32_t V = cfg.vocab_size;
    View normed = x;
    if (cfg.final_norm) {
      if (!(pre && cfg.n_layers > 0)) ops::layernorm(*g, x, whole(w.lnf_g), whole(w.lnf_b), h, live_rows, C, eps, "ln_f");
      normed = h;
    }
    const View head_bias = view_or_none(w.head_b);
    if (batch || burst) {
      batch_head(normed, head_bias);
    } else if (fold && cfg.final_norm) {
      // One token: the LM head normalises x itself and there is only the last position.
      const View logits = head == Head::AllLogits ? rows_of(m.logits_all(), 1, V) : whole(m.logits_last_);
      folded_head(head_bias, logits, 1);
      if (head == Head::LastSample)
        ops::sample(*g, logits, ids, step, whole(m.sample_scratch_), V, m.sampling_, "sample", m.sampling_state_.get());
    } else if (head == Head::AllLogits) {
      const uint32_t rows = T - logits_from;  // from row logits_from on (GptModel::aligned_logit_row)
      const View from = logits_from ? View{normed.buffer, normed.offset + uint64_t(logits_from) * C * 4,
                                           uint64_t(rows) * C * 4}
                                    : normed;
      ops::linear(*g, from, w.lm_head(), head_bias, rows_of(m.logits_all(), rows, V), rows, plain, none(), "lm_head");
    } else {
      last_row_head(normed);
    }
  }

  // The LM head of the last position only (row 0 of `normed` after a last_row_only step).
  // Greedy decoding: the LM head's last workgroup picks the token where it can (CPU
  // devices), saving the sampler its dispatch.
  void last_row_head(View normed) {
    const uint32_t V = cfg.vocab_size;
    const View head_bias = view_or_none(w.head_b);
    View last = normed;
    if (live_rows > 1) {
      ops::copy_rows(*g, normed, whole(m.h_last_), live_rows - 1, 1, C, "last_row");
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

  // A batched step's LM head over its live_rows rows (one per sequence that ran), in the order of a
  // lone step's one-row product with exact rows; then every row's sampler (its own
  // parameters, seed and counter) in one dispatch, a burst's twin drawing from its source's
  // row (the table's same_as, DecodeBatch); or, where the batch gives no table for that
  // (rows with sampling controls), each row's logits (a twin's source's) to its sequence
  // and its own sampler.
  void batch_head(View normed, View head_bias) {
    const uint32_t V = cfg.vocab_size, rows = static_cast<uint32_t>(seqs.size());
    // The rows only: the whole buffer (max_chunk rows) may pass the device's binding range.
    const View logits = rows_of(m.logits_all(), rows, V);
    const Matrix& W = w.lm_head();
    if (fold && cfg.final_norm)
      folded_head(head_bias, rows_of(m.logits_all(), live_rows, V), live_rows);
    else
      ops::linear_with(*g, normed, W, head_bias, rows_of(m.logits_all(), live_rows, V), live_rows,
                       {.kernel = m.plan_.batch_linear_kernel(m.ctx_, live_rows, exact_rows, W, normed), .ep = plain,
                        .name = "lm_head"});
    if (bs.sample_ids.buffer) {
      uint32_t filters = 0;
      for (const GptModel* s : seqs) filters |= ops::sampler_filters(s->sampling_, V);
      ops::sample_rows(*g, logits, rows, bs.sample_table, bs.sample_ids, bs.sample_scratch, V, filters, "sample");
      return;
    }
    for (uint32_t b = 0; b < rows; ++b) {
      GptModel& s = *seqs[b];
      ops::copy_rows(*g, logits, whole(s.logits_last_), b < live_rows ? b : twin_of[b], 1, V, "row_logits");
      ops::sample(*g, whole(s.logits_last_), whole(s.ids_), whole(s.step_), whole(s.sample_scratch_), V, s.sampling_,
                  "sample", s.sampling_state_.get());
    }
  }
};

// The whole model as a graph for a step of T tokens: embed -> per layer (LayerNorm,
// attention, LayerNorm, MLP) -> final norm and LM head. Everything the config decides
// (pre/post norm, activation, biases, tying, final norm) is decided here, once.
std::unique_ptr<Graph> GptModel::build_graph(uint32_t T, Head head, const BatchStep* batch, uint32_t logits_from) {
  GraphBuild b(*this, T, head, batch ? *batch : BatchStep{});
  b.logits_from = logits_from;
  b.embed();
  for (uint32_t l = 0; l < cfg_.n_layers; ++l)
    if (!(b.pre ? b.pre_ln_layer(l) : b.post_ln_layer(l))) break;  // nothing past the KV cache
  if (head != Head::KvOnly) b.lm_head();
  b.g->record(profile_);
  return std::move(b.g);
}

}  // namespace gptvk
