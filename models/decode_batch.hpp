// Batched decoding: one submit decodes the next token of several sequences. Each sequence
// is a GptModel over the same weights (a slot: its KV cache, position, sampling parameters,
// seed and token history), started as usual by prefill_and_sample; a batched step does for
// each what its decode_next() would, in one graph whose products run over all the rows at
// once (models/gpt_graph.cpp: GraphBuild with one row per sequence), and returns one id a
// sequence. A sequence may take single and batched steps in any order.
//
//   DecodeBatch batch;
//   for (auto* m : models) m->prefill_and_sample(prompt_of(m));
//   std::vector<uint32_t> next = batch.decode_next(models);  // one token each
//
// Graphs are recorded per composition (which models, in which rows, with which sampling
// parameters: a model's set_sampling makes its graphs stale) and kept for the most recent
// few, so a steady batch replays one graph; a sequence joining or leaving records a new
// one (milliseconds; the pipelines are those of the one-token and prompt steps). Models
// made by make_slot_models share a KvPool: on CPU devices their rows then attend in one
// dispatch a layer, through a row table of positions and slots written before each step.
// Every row's token is drawn by one sampler dispatch (ops::sample_rows, each row with its
// own parameters, seed and counter from a table written before each step), unless a row
// uses the sampling controls: then each row has its own sampler.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/graph.hpp"
#include "models/gpt_model.hpp"

namespace gptvk {

class DecodeBatch {
 public:
  // `exact_rows` (the default): each row's arithmetic that of the sequence's one-token
  // step, bit for bit, in one batched graph (ExecutionPlan::batch_linear_kernel): on GPUs
  // the one-token mat-vecs over every row, their LayerNorms folded in as that step folds
  // them. Otherwise one batched graph whose products are the prompt chunks' GEMMs: a row's
  // logits may differ from the one-token step's in the last bits (summation order; on
  // GPUs the cooperative-matrix GEMM rounds x to f16).
  explicit DecodeBatch(bool exact_rows = true) : exact_rows_(exact_rows) {}

  // The device bytes a DecodeBatch over `slots` models of this config comes to at most
  // (its sampler's rows, kept-logits rows and row tables), beside theirs (slot_device_bytes).
  static uint64_t device_bytes(const vk::Context& ctx, const ModelConfig& cfg, uint32_t slots, uint32_t max_chunk);

  // One decode step of every model in `seqs` (distinct, sharing weights and config, each
  // started by prefill_and_sample, its context not full; at most seqs[0]->max_chunk()
  // rows): the same as each one's decode_next(). Returns their next token ids, in order.
  // The models must outlive this object. seqs[0]->profile_summary() then times the step
  // (graphs recorded after its set_profile(true)).
  std::vector<uint32_t> decode_next(std::span<GptModel* const> seqs);

  // Prompts in bursts: the same as each model's sample_after_prefill(prompts[b],
  // prefilled[b]) (its earlier chunks run), in as few graphs as fit: consecutive prompts
  // whose last chunks fit a chunk's rows together (of seqs[first]) run as one graph whose
  // products take all their rows at once, so a server admitting several requests pays one
  // LM-head product and one graph, not one each. Each sequence's first token and logits are
  // those of its own call (with exact rows; prompts run one by one where a burst cannot
  // match that: on GPUs, whose prompt steps take other kernels than a burst's; and
  // one-token chunks, see burst_fits). Returns the first tokens, in order.
  // Twins: a sequence whose prompt and prefilled count equal an earlier one's in the same
  // burst, or those of one that ran as its own step (the same request's n choices, or
  // clients sending one prompt), runs no rows of its own: its keys and values are copied
  // from that one's cache, and it samples, with its own parameters and seed, from that
  // one's logits, which are what its own prompt would give, bit for bit.
  std::vector<uint32_t> sample_after_prefill(std::span<GptModel* const> seqs,
                                             std::span<const std::span<const uint32_t>> prompts,
                                             std::span<const uint32_t> prefilled);
  // Exact hits of a prompt cache: each model keeps the logits its prompt's first token was
  // drawn from (right after that draw, before its next step), copied beside its keys and
  // values in one submission.
  void keep_first_logits(std::span<GptModel* const> seqs);
  // Whether sample_kept can draw for these sequences: none uses the sampling controls
  // (penalties, logit bias, min-p), which the one sampler dispatch has not.
  static bool can_sample_kept(std::span<GptModel* const> seqs);
  // Prompts whose keys and values each model's KV cache holds and whose first-token logits
  // it kept (keep_first_logits, or GptModel::copy_kept_prompt from a model that did): the
  // same as sample_after_prefill, running no rows. Each draws, with its own parameters and
  // seed, from its kept logits, equal prompts from one copy, all in one sampler dispatch.
  // The logits of the prompts as they last ran give the same results as running them again
  // (with exact rows, bit for bit); the caller vouches that they are these prompts'.
  std::vector<uint32_t> sample_kept(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                                    std::span<const uint32_t> prefilled);
  // Whether a last chunk of `tokens` tokens can join a burst (a one-token chunk takes the
  // decode step's kernels, which a burst's rows do not match).
  static bool burst_fits(uint32_t tokens) { return tokens >= 2; }

  // Compiles, without running anything (Graph::warm_up), the pipelines of decode steps over
  // the first 2, 3, 4, 8 and 16 of `slots` (as many as there are), each with its sampling
  // parameters as they are now: the kernels a batch of each size range takes. lavapipe
  // JIT-compiles a pipeline at its first dispatch, so a server's first busy rounds would
  // otherwise pay for them.
  void warm_up(std::span<GptModel* const> slots);

  // Prompts sample_after_prefill has run in bursts so far (not those it ran one by one),
  // and of those the twins, which shared another's prompt.
  uint64_t burst_prompts() const { return burst_prompts_; }
  uint64_t twin_prompts() const { return twin_prompts_; }

 private:
  struct Entry {
    std::vector<GptModel*> seqs;
    std::vector<uint32_t> lens;  // a burst's rows per sequence; empty for a decode step
    std::vector<uint32_t> twin_of;  // a burst's twins' sequences whose prompts they share
    std::vector<uint64_t> sampling_versions;
    std::unique_ptr<Graph> graph;
    uint64_t last_used = 0;
    bool uses_rows = false;     // its attention reads the row table
    bool uses_sampler = false;  // one sampler dispatch for every row, reading the sampler table
  };
  static constexpr size_t kMaxGraphs = 8;
  static size_t sampler_rows_for(const vk::Context& ctx, const ModelConfig& cfg, size_t slots, size_t rows);
  // The decode step's graph for seqs, or with `lens` (and twin_of) a burst's.
  Graph& graph_for(std::span<GptModel* const> seqs, std::span<const uint32_t> lens = {},
                   std::span<const uint32_t> twin_of = {});
  void check_shared(std::span<GptModel* const> seqs) const;
  void check(std::span<GptModel* const> seqs) const;
  // One prompt and one prefilled count per sequence, and check_shared.
  void check_prompts(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                     std::span<const uint32_t> prefilled) const;
  // Whether prompts over `first`'s weights and device can run in bursts.
  bool can_burst(const GptModel& first) const;
  // Twin `m` of `source`, which ran the same prompt from `prefilled` on as its own step:
  // its keys and values copied, its first token sampled from a copy of source's logits.
  uint32_t run_twin(GptModel& m, const GptModel& source, std::span<const uint32_t> prompt, uint32_t prefilled);
  // One burst: every prompt's last chunk (lens[b] tokens, together at most seqs[0]'s chunk).
  std::vector<uint32_t> run_burst(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                                  std::span<const uint32_t> prefilled, std::span<const uint32_t> lens);
  // Whether the rows' attention can be one dispatch a layer: every sequence in one KvPool and
  // the device running ops::kv_append_attention_rows; in a burst (lens, as graph_for takes
  // them), for the prompts that attend as their own steps would there
  // (GptModel::burst_row_attention), at least one. Then rows_ holds the row table.
  bool one_attention_dispatch(std::span<GptModel* const> seqs, std::span<const uint32_t> lens);
  void write_rows(std::span<GptModel* const> seqs, std::span<const uint32_t> lens);
  // Whether every row can take one sampler dispatch (ops::sample_rows: no sampling
  // controls); then its buffers hold at least seqs.size() rows.
  bool one_sampler_dispatch(std::span<GptModel* const> seqs);
  // Each row's parameters and counter; a burst's twin (twin_of[b] != b) draws from its
  // source's row of logits.
  void write_sampler_table(std::span<GptModel* const> seqs, std::span<const uint32_t> twin_of);
  // Runs a batched graph of seqs (its tables written first; a burst's lens and twin_of as
  // graph_for took them), then hands each sequence its token and logits; returns the tokens.
  std::vector<uint32_t> run(Graph& g, std::span<GptModel* const> seqs, std::span<const uint32_t> lens,
                            std::span<const uint32_t> twin_of);

  // Sets each sequence up as its own sample_after_prefill would (ids, sampler history and
  // counter) before a batched draw of its first token.
  static void set_up_prompts(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts,
                             std::span<const uint32_t> prefilled);
  // After a batched draw of first tokens: each sequence stands after its prompt.
  static void stand_after_prompts(std::span<GptModel* const> seqs, std::span<const std::span<const uint32_t>> prompts);

  bool exact_rows_;
  vk::Buffer rows_;  // host-visible row table: an ops::RowEntry per row
  vk::Buffer row_ids_;  // and each row's token id, for the one embedding dispatch
  bool rows_used_ = false;  // the graph graph_for() returned last reads it
  // ops::sample_rows' table (host-visible), the ids it writes (host-visible) and its scratch,
  // for sampler_rows_ rows; sampler_used_: the graph graph_for() returned last uses them.
  vk::Buffer sample_table_, sample_ids_, sample_scratch_;
  size_t sampler_rows_ = 0;
  bool sampler_used_ = false;
  // sample_kept: the kept logits it draws from ([sampler_rows_][vocab]) and its graph, for
  // kept_graph_rows_ rows with kept_graph_filters_ (recorded again when either changes).
  vk::Buffer kept_rows_;
  std::unique_ptr<Graph> kept_graph_;
  size_t kept_graph_rows_ = 0;
  uint32_t kept_graph_filters_ = 0;
  std::vector<Entry> graphs_;
  uint64_t steps_ = 0;
  uint64_t burst_prompts_ = 0, twin_prompts_ = 0;
};

}  // namespace gptvk
