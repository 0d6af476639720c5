#include "models/decode_batch.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/error.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/copy_rows.hpp"
#include "engine/ops/sample.hpp"
#include "engine/ops/sample_controls.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/context.hpp"
#include "models/kv_pool.hpp"

namespace gptvk {

namespace {

// The first of sequences [from, b) whose prompt and prefilled count are b's, so that b can
// be its twin in a burst; b when there is none.
size_t twin_source(std::span<const std::span<const uint32_t>> prompts, std::span<const uint32_t> prefilled,
                   size_t from, size_t b) {
  for (size_t a = from; a < b; ++a)
    if (prefilled[a] == prefilled[b] && std::ranges::equal(prompts[a], prompts[b])) return a;
  return b;
}

}  // namespace

void DecodeBatch::check_shared(std::span<GptModel* const> seqs) const {
  if (seqs.empty()) throw std::invalid_argument("DecodeBatch: no sequences");
  const GptModel& first = *seqs[0];
  for (size_t i = 0; i < seqs.size(); ++i) {
    const GptModel& m = *seqs[i];
    if (&m.context() != &first.context() || m.shared_weights() != first.shared_weights())
      throw std::invalid_argument("DecodeBatch: the sequences do not share one device and one set of weights");
    for (size_t j = 0; j < i; ++j)
      if (seqs[j] == seqs[i]) throw std::invalid_argument("DecodeBatch: a sequence appears twice");
  }
}

void DecodeBatch::check_prompts(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                                std::span<const uint32_t> prefilled) const {
  if (prompts.size() != seqs.size() || prefilled.size() != seqs.size())
    throw std::invalid_argument("DecodeBatch: one prompt and one prefilled count per sequence");
  check_shared(seqs);
}

void DecodeBatch::check(std::span<GptModel* const> seqs) const {
  check_shared(seqs);
  const GptModel& first = *seqs[0];
  if (seqs.size() > first.max_chunk())
    throw std::invalid_argument("DecodeBatch: " + std::to_string(seqs.size()) + " sequences, more than the " +
                                std::to_string(first.max_chunk()) + " rows of the first one's activations");
  for (const GptModel* s : seqs) {
    const GptModel& m = *s;
    if (m.position() == 0) throw std::logic_error("DecodeBatch: a sequence was not started (prefill_and_sample)");
    if (m.position() >= m.config().context_length)
      throw InputError("the context of " + std::to_string(m.config().context_length) + " tokens is full");
  }
}

bool DecodeBatch::one_attention_dispatch(std::span<GptModel* const> seqs, std::span<const uint32_t> lens) {
  const GptModel& first = *seqs[0];
  for (const GptModel* m : seqs)
    if (m->kv_ != first.kv_) return false;
  const KvPool& kv = *first.kv_;
  if (first.cfg_.n_layers == 0 ||
      !ops::attention_rows_ok(first.ctx_, whole(first.qkv_), kv.all_keys(0), kv.all_values(0), first.attention_shape()))
    return false;
  // A burst: where one of its prompts attends in the one dispatch (the others run their own).
  if (!lens.empty() && std::none_of(lens.begin(), lens.end(), [&](uint32_t n) { return n && first.burst_row_attention(n); }))
    return false;
  // Sized for the pool's decode steps (its models are distinct, so no step over it has more
  // rows) and for a burst of the first model's chunk.
  const uint64_t rows = std::max<uint64_t>(kv.slots(), first.max_chunk());
  if (rows_.empty()) {
    rows_ = vk::Buffer(first.ctx_, rows * sizeof(ops::RowEntry), vk::Memory::Host, "batch row table");
    row_ids_ = vk::Buffer(first.ctx_, rows * 4, vk::Memory::Host, "batch row ids");
  }
  const uint64_t T = lens.empty() ? seqs.size() : std::accumulate(lens.begin(), lens.end(), uint64_t(0));
  return rows_.size() >= T * sizeof(ops::RowEntry);  // (a larger pool than the first: row by row)
}

// Room for 16 rows or every KV slot, so that a growing batch rarely records again, but never
// more scratch than one binding may hold (GPTVK_FORCE=max_range shrinks it).
size_t DecodeBatch::sampler_rows_for(const vk::Context& ctx, const ModelConfig& cfg, size_t slots, size_t rows) {
  const size_t fit = ops::sampler_rows_per_binding(ctx, cfg.vocab_size);
  return std::max(rows, std::min(std::max<size_t>(slots, 16), fit));
}

uint64_t DecodeBatch::device_bytes(const vk::Context& ctx, const ModelConfig& cfg, uint32_t slots, uint32_t max_chunk) {
  const uint64_t sampler = sampler_rows_for(ctx, cfg, slots, slots);
  const uint64_t table = std::max(slots, std::min(max_chunk, cfg.context_length));
  const uint64_t bytes = sampler * (sizeof(ops::SampleRow) + 4 + ops::sample_scratch_bytes(cfg.vocab_size) +
                                    uint64_t(cfg.vocab_size) * 4) +
                         table * (sizeof(ops::RowEntry) + 4);
  return bytes + 6 * kAllocationRounding;  // six buffers
}

bool DecodeBatch::one_sampler_dispatch(std::span<GptModel* const> seqs) {
  for (const GptModel* m : seqs)
    if (m->sampling_.controls_on()) return false;
  if (sampler_rows_ < seqs.size()) {
    graphs_.clear();  // recorded with the smaller buffers, which go now
    kept_graph_.reset();
    kept_rows_ = {};
    const GptModel& first = *seqs[0];
    sampler_rows_ = sampler_rows_for(first.ctx_, first.cfg_, first.kv_->slots(), seqs.size());
    sample_table_ = vk::Buffer(first.ctx_, sampler_rows_ * sizeof(ops::SampleRow), vk::Memory::Host, "batch sampler table");
    sample_ids_ = vk::Buffer(first.ctx_, sampler_rows_ * 4, vk::Memory::Host, "batch sampled ids");
    sample_scratch_ = vk::Buffer(first.ctx_, sampler_rows_ * ops::sample_scratch_bytes(first.cfg_.vocab_size),
                                 vk::Memory::Device, "batch sampler scratch");
  }
  return true;
}

void DecodeBatch::write_sampler_table(std::span<GptModel* const> seqs, std::span<const uint32_t> twin_of) {
  auto* table = static_cast<ops::SampleRow*>(sample_table_.mapped());
  for (size_t b = 0; b < seqs.size(); ++b) {
    table[b] = ops::sample_row(seqs[b]->sampling_, static_cast<const StepState*>(seqs[b]->step_.mapped())->rng_step);
    if (!twin_of.empty() && twin_of[b] != b) table[b].same_as = twin_of[b] + 1;
  }
}

std::vector<uint32_t> DecodeBatch::run(Graph& g, std::span<GptModel* const> seqs, std::span<const uint32_t> lens,
                                       std::span<const uint32_t> twin_of) {
  GptModel& first = *seqs[0];
  // A GPU's exact rows fold the LayerNorms as its one-token step does, from the first
  // sequence's folded vectors.
  if (exact_rows_) first.ensure_folded_norms();
  if (rows_used_) write_rows(seqs, lens);
  if (sampler_used_) write_sampler_table(seqs, twin_of);
  g.run();
  std::vector<uint32_t> ids;
  for (size_t b = 0; b < seqs.size(); ++b) {
    GptModel& m = *seqs[b];
    if (sampler_used_) m.took_batch_sample(static_cast<const uint32_t*>(sample_ids_.mapped())[b]);
    ids.push_back(static_cast<const uint32_t*>(m.ids_.mapped())[0]);
    const uint64_t row_bytes = uint64_t(first.cfg_.vocab_size) * 4;
    const uint64_t row = twin_of.empty() ? b : twin_of[b];  // a twin's logits are its source's
    m.step_logits_ = View{&first.logits_all_, row * row_bytes, row_bytes};
    m.last_run_.clear();
  }
  first.last_run_ = {&g};  // the graph runs on its activations: its profile_summary() is the step's
  return ids;
}

void DecodeBatch::write_rows(std::span<GptModel* const> seqs, std::span<const uint32_t> lens) {
  auto* rows = static_cast<ops::RowEntry*>(rows_.mapped());
  auto* row_ids = static_cast<uint32_t*>(row_ids_.mapped());
  for (size_t b = 0; b < seqs.size(); ++b) {
    const GptModel& m = *seqs[b];
    // A decode step's row: its last sampled token, at its position. A burst's: its prompt
    // chunk's rows from where its step starts (set_up_prompts), or none for a twin. The ids
    // are where the sequence's own step reads them.
    const uint32_t len = lens.empty() ? 1 : lens[b];
    const uint32_t pos0 = lens.empty() ? m.position() : static_cast<const StepState*>(m.step_.mapped())->pos;
    const uint32_t skip = lens.empty() || m.burst_row_attention(len) ? 0 : 1;
    const auto* ids = static_cast<const uint32_t*>(m.ids_.mapped());
    for (uint32_t i = 0; i < len; ++i) {
      *rows++ = {pos0, m.kv_->slot_unit(m.kv_slot_), i, skip};
      *row_ids++ = ids[i];
    }
  }
}

Graph& DecodeBatch::graph_for(std::span<GptModel* const> seqs, std::span<const uint32_t> lens,
                              std::span<const uint32_t> twin_of) {
  std::vector<uint64_t> versions;
  for (const GptModel* m : seqs) versions.push_back(m->sampling_version_);
  ++steps_;
  for (Entry& e : graphs_)
    // (std::equal over an empty span would hand memcmp its null data pointer.)
    if (std::equal(e.seqs.begin(), e.seqs.end(), seqs.begin(), seqs.end()) && e.sampling_versions == versions &&
        e.lens.size() == lens.size() && (lens.empty() || std::equal(e.lens.begin(), e.lens.end(), lens.begin())) &&
        e.twin_of.size() == twin_of.size() &&
        (twin_of.empty() || std::equal(e.twin_of.begin(), e.twin_of.end(), twin_of.begin()))) {
      e.last_used = steps_;
      rows_used_ = e.uses_rows;
      sampler_used_ = e.uses_sampler;
      return *e.graph;
    }
  // A graph with a model whose sampling changed since is never used again: drop those first.
  std::erase_if(graphs_, [&](const Entry& e) {
    for (size_t i = 0; i < e.seqs.size(); ++i)
      for (size_t j = 0; j < seqs.size(); ++j)
        if (e.seqs[i] == seqs[j] && e.sampling_versions[i] != versions[j]) return true;
    return false;
  });
  if (graphs_.size() >= kMaxGraphs)
    graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; }));
  Entry e{{seqs.begin(), seqs.end()}, {lens.begin(), lens.end()}, {twin_of.begin(), twin_of.end()}, std::move(versions),
          nullptr, steps_};
  e.uses_sampler = one_sampler_dispatch(seqs);  // before the graphs' buffers may go
  e.uses_rows = one_attention_dispatch(seqs, lens);
  GptModel::BatchStep step{seqs, lens, twin_of, exact_rows_};
  if (e.uses_rows) {
    step.rows = whole(rows_);
    step.row_ids = whole(row_ids_);
  }
  if (e.uses_sampler) {
    step.sample_table = whole(sample_table_);
    step.sample_ids = whole(sample_ids_);
    step.sample_scratch = whole(sample_scratch_);
  }
  uint32_t T = static_cast<uint32_t>(seqs.size());
  if (!lens.empty()) T = std::accumulate(lens.begin(), lens.end(), 0u);
  e.graph = seqs[0]->build_graph(T, GptModel::Head::LastSample, &step);
  rows_used_ = e.uses_rows;
  sampler_used_ = e.uses_sampler;
  graphs_.push_back(std::move(e));
  return *graphs_.back().graph;
}

std::vector<uint32_t> DecodeBatch::decode_next(std::span<GptModel* const> seqs) {
  check(seqs);
  // Each row embeds its sequence's last sampled token at its position, and its sampler
  // writes the next one there and advances the position: as decode_next() does.
  std::vector<uint32_t> ids = run(graph_for(seqs), seqs, {}, {});
  for (GptModel* m : seqs) ++m->pos_;
  return ids;
}

void DecodeBatch::warm_up(std::span<GptModel* const> slots) {
  for (size_t n : {2, 3, 4, 8, 16})
    if (n <= slots.size() && n <= slots[0]->max_chunk()) graph_for(slots.first(n)).warm_up();
}

bool DecodeBatch::can_burst(const GptModel& first) const {
  if (!first.plan_.bursts_prompts(exact_rows_) || first.cfg_.n_layers == 0) return false;
  // Every sequence's rows start on a row of the activations, each view offset aligned.
  return first.row_aligned(1, first.cfg_.emb_dim);
}

std::vector<uint32_t> DecodeBatch::sample_after_prefill(std::span<GptModel* const> seqs,
                                                        std::span<const std::span<const uint32_t>> prompts,
                                                        std::span<const uint32_t> prefilled) {
  check_prompts(seqs, prompts, prefilled);
  std::vector<uint32_t> lens;
  for (size_t b = 0; b < seqs.size(); ++b) {
    if (prefilled[b] >= prompts[b].size()) throw std::logic_error("DecodeBatch: no prompt tokens left to run");
    lens.push_back(static_cast<uint32_t>(prompts[b].size() - prefilled[b]));
  }
  const bool bursts = can_burst(*seqs[0]);
  std::vector<uint32_t> ids(seqs.size());
  std::vector<bool> alone(seqs.size());  // ran as its own step: its logits stay in its model
  // In order: as many prompts together as fit the first one's activations (its chunk's
  // rows, a twin taking none but its logits' row); one that cannot join a burst, or finds
  // itself alone, runs as its own step.
  for (size_t b = 0; b < seqs.size();) {
    size_t e = b;
    for (uint64_t rows = 0; e < seqs.size() && bursts && burst_fits(lens[e]) && e - b < seqs[b]->max_chunk(); ++e) {
      const uint32_t own = twin_source(prompts, prefilled, b, e) < e ? 0 : lens[e];
      if (rows + own > seqs[b]->max_chunk()) break;
      rows += own;
    }
    if (e - b < 2) {
      const size_t source = twin_source(prompts, prefilled, 0, b);
      if (source < b && alone[source]) {
        ids[b] = run_twin(*seqs[b], *seqs[source], prompts[b], prefilled[b]);
      } else {
        ids[b] = seqs[b]->sample_after_prefill(prompts[b], prefilled[b]);
        alone[b] = true;
      }
      ++b;
      continue;
    }
    const auto group = run_burst(seqs.subspan(b, e - b), prompts.subspan(b, e - b), prefilled.subspan(b, e - b),
                                 std::span<const uint32_t>(lens).subspan(b, e - b));
    std::copy(group.begin(), group.end(), ids.begin() + b);
    b = e;
  }
  return ids;
}

uint32_t DecodeBatch::run_twin(GptModel& m, const GptModel& source, std::span<const uint32_t> prompt,
                               uint32_t prefilled) {
  GptModel* const seqs[] = {&m};
  const std::span<const uint32_t> prompts[] = {prompt};
  const uint32_t from[] = {prefilled};
  // Set up as its own sample_after_prefill would be, then its sampler over a copy of the
  // logits the source sampled from.
  set_up_prompts(seqs, prompts, from);
  const uint32_t V = m.cfg_.vocab_size;
  Graph g(m.ctx_);
  ops::copy_rows(g, source.step_logits_, whole(m.logits_last_), 0, 1, V, "twin_logits");
  ops::sample(g, whole(m.logits_last_), whole(m.ids_), whole(m.step_), whole(m.sample_scratch_), V, m.sampling_,
              "sample", m.sampling_state_.get());
  g.record();
  g.run();
  const auto end = static_cast<uint32_t>(prompt.size());
  copy_on_device(m.ctx_, m.kv_copies_from(source, prefilled, end), m.attention_shape());
  m.step_logits_ = whole(m.logits_last_);
  m.last_run_.clear();
  stand_after_prompts(seqs, prompts);
  ++twin_prompts_;
  return static_cast<const uint32_t*>(m.ids_.mapped())[0];
}

std::vector<uint32_t> DecodeBatch::run_burst(std::span<GptModel* const> seqs,
                                             std::span<const std::span<const uint32_t>> prompts,
                                             std::span<const uint32_t> prefilled, std::span<const uint32_t> lens) {
  set_up_prompts(seqs, prompts, prefilled);  // the burst's graph reads their ids there
  // The graph's rows: the prompts that run, then their twins (GptModel::BatchStep).
  const size_t n = seqs.size();
  std::vector<size_t> source(n), order, at(n);
  for (size_t b = 0; b < n; ++b)
    if ((source[b] = twin_source(prompts, prefilled, 0, b)) == b) order.push_back(b);
  const size_t runs = order.size();
  for (size_t b = 0; b < n; ++b)
    if (source[b] != b) order.push_back(b);
  for (size_t i = 0; i < n; ++i) at[order[i]] = i;
  std::vector<GptModel*> rows;
  std::vector<uint32_t> row_lens, twin_of;
  for (size_t i = 0; i < n; ++i) {
    rows.push_back(seqs[order[i]]);
    row_lens.push_back(i < runs ? lens[order[i]] : 0);
    twin_of.push_back(static_cast<uint32_t>(at[source[order[i]]]));
  }
  const std::vector<uint32_t> row_ids = run(graph_for(rows, row_lens, twin_of), rows, row_lens, twin_of);
  // A twin's keys and values: its prompt's, from the sequence that ran it.
  std::vector<KvCopy> copies;
  for (size_t b = 0; b < n; ++b)
    if (source[b] != b) {
      const auto more = seqs[b]->kv_copies_from(*seqs[source[b]], prefilled[b], static_cast<uint32_t>(prompts[b].size()));
      copies.insert(copies.end(), more.begin(), more.end());
    }
  copy_on_device(seqs[0]->ctx_, copies, seqs[0]->attention_shape());
  burst_prompts_ += n;
  twin_prompts_ += n - runs;
  stand_after_prompts(seqs, prompts);
  std::vector<uint32_t> ids(n);
  for (size_t b = 0; b < n; ++b) ids[b] = row_ids[at[b]];
  return ids;
}

void DecodeBatch::set_up_prompts(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                                 std::span<const uint32_t> prefilled) {
  // As its own sample_after_prefill sets it up: its last chunk's ids at its position, its
  // sampler's history and counter.
  for (size_t b = 0; b < seqs.size(); ++b) {
    GptModel& m = *seqs[b];
    m.begin_last_chunk(prompts[b], prefilled[b]);
    m.write_ids(prompts[b].subspan(prefilled[b]), prefilled[b]);
    static_cast<StepState*>(m.step_.mapped())->rng_step = 0;
  }
}

void DecodeBatch::stand_after_prompts(std::span<GptModel* const> seqs,
                                      std::span<const std::span<const uint32_t>> prompts) {
  for (size_t b = 0; b < seqs.size(); ++b) {
    GptModel& m = *seqs[b];
    m.pos_ = static_cast<uint32_t>(prompts[b].size());
    static_cast<StepState*>(m.step_.mapped())->pos = m.pos_;  // the sampled token goes after the prompt
  }
}

void DecodeBatch::keep_first_logits(std::span<GptModel* const> seqs) {
  if (seqs.empty()) return;
  std::vector<ViewCopy> copies;
  for (GptModel* m : seqs) copies.push_back({m->step_logits_, whole(m->kept_logits())});
  copy_on_device(seqs[0]->ctx_, {}, seqs[0]->attention_shape(), copies);
}

bool DecodeBatch::can_sample_kept(std::span<GptModel* const> seqs) {
  return std::none_of(seqs.begin(), seqs.end(), [](const GptModel* m) { return m->sampling_.controls_on(); });
}

std::vector<uint32_t> DecodeBatch::sample_kept(std::span<GptModel* const> seqs,
                                               std::span<const std::span<const uint32_t>> prompts,
                                               std::span<const uint32_t> prefilled) {
  check_prompts(seqs, prompts, prefilled);
  if (!one_sampler_dispatch(seqs)) throw std::logic_error("DecodeBatch::sample_kept: a sequence uses the sampling controls");
  GptModel& first = *seqs[0];
  const uint32_t V = first.cfg_.vocab_size;
  const uint64_t row_bytes = uint64_t(V) * 4;
  if (kept_rows_.empty()) kept_rows_ = vk::Buffer(first.ctx_, sampler_rows_ * row_bytes, vk::Memory::Device, "kept logits rows");
  set_up_prompts(seqs, prompts, prefilled);
  // Row b holds b's kept logits, unless b draws from an earlier equal prompt's row.
  const size_t n = seqs.size();
  std::vector<uint32_t> twin_of(n);
  std::vector<ViewCopy> copies;
  uint32_t filters = 0;
  for (size_t b = 0; b < n; ++b) {
    GptModel& m = *seqs[b];
    if (m.kept_logits_.empty()) throw std::logic_error("DecodeBatch::sample_kept: no logits kept");
    twin_of[b] = static_cast<uint32_t>(twin_source(prompts, prefilled, 0, b));
    if (twin_of[b] == b) copies.push_back({whole(m.kept_logits_), View{&kept_rows_, b * row_bytes, row_bytes}});
    filters |= ops::sampler_filters(m.sampling_, V);
  }
  copy_on_device(first.ctx_, {}, first.attention_shape(), copies);
  if (!kept_graph_ || kept_graph_rows_ != n || kept_graph_filters_ != filters) {
    kept_graph_ = std::make_unique<Graph>(first.ctx_);
    ops::sample_rows(*kept_graph_, whole(kept_rows_), static_cast<uint32_t>(n), whole(sample_table_), whole(sample_ids_),
                     whole(sample_scratch_), V, filters, "sample");
    kept_graph_->record();
    kept_graph_rows_ = n;
    kept_graph_filters_ = filters;
  }
  write_sampler_table(seqs, twin_of);
  kept_graph_->run();
  std::vector<uint32_t> ids(n);
  for (size_t b = 0; b < n; ++b) {
    GptModel& m = *seqs[b];
    ids[b] = static_cast<const uint32_t*>(sample_ids_.mapped())[b];
    m.took_batch_sample(ids[b]);
    m.step_logits_ = View{&kept_rows_, twin_of[b] * row_bytes, row_bytes};
    m.last_run_.clear();
  }
  stand_after_prompts(seqs, prompts);
  return ids;
}

}  // namespace gptvk
