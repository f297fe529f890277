#include "share/selective_recompute.h"

#include <algorithm>
#include <string>

#include "share/token_selection.h"

namespace agentkv {

namespace {

Status validate_reuse(const Model& model, const KvArena& kv, std::span<const int32_t> tokens,
                      std::span<const AgentSegment> agents, const RecomputeOptions& o) {
  const ModelConfig& c = model.config();
  if (kv.n_layer() != c.n_layer || kv.kv_dim() != c.kv_dim())
    return make_error("selective_recompute: KV arena was made for another model geometry");
  if (!(o.ratio >= 0.0 && o.ratio <= 1.0))
    return make_error("selective_recompute: ratio " + std::to_string(o.ratio) + " outside [0, 1]");
  if (o.n_first < 0 || o.n_last < 0) return make_error("selective_recompute: n_first or n_last is negative");
  if (o.check_layer < 0 || o.check_layer >= c.n_layer)
    return make_error("selective_recompute: check_layer " + std::to_string(o.check_layer) + " outside [0, " +
                      std::to_string(c.n_layer) + ")");
  for (int32_t t : tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("selective_recompute: token id " + std::to_string(t) + " out of range");
  const int32_t n = int32_t(tokens.size());
  for (size_t a = 0; a < agents.size(); ++a) {
    AGENTKV_TRY(validate_slot_range(KvSlotRange{agents[a].blocks, agents[a].slot0}, n, kv,
                                    "selective_recompute: agent " + std::to_string(a)));
    if (agents[a].pos0 < 0) return make_error("selective_recompute: agent " + std::to_string(a) + " has a negative position");
  }
  return {};
}

// Squared L2 distance of two K rows, one cached (f16), one kept as floats.
float squared_distance(const kv_t* cached, const float* kept, int n, float* scratch) {
  kv_load(scratch, cached, n);
  float sum = 0;
  for (int j = 0; j < n; ++j) sum += (scratch[j] - kept[j]) * (scratch[j] - kept[j]);
  return sum;
}

// recompute_deviating_tokens after its arguments were checked (selective_recompute checks them once,
// before it writes the re-rotated master).
Result<std::vector<AgentRecompute>> recompute_checked(const Model& model, const KvArena& kv,
                                                      std::span<const int32_t> segment_tokens,
                                                      std::span<const AgentSegment> agents,
                                                      const RecomputeOptions& options, const RecomputeHooks& hooks,
                                                      ThreadPool& pool) {
  float* const last_logits = hooks.last_logits;
  const ModelConfig& c = model.config();
  const int32_t n = int32_t(segment_tokens.size());
  const int64_t n_agents = int64_t(agents.size());
  std::vector<AgentRecompute> out(agents.size());
  if (n == 0 || n_agents == 0) return out;
  const int cl = options.check_layer;
  const int kvd = c.kv_dim();
  const int bs = kv.block_size();
  const PagedKvLayer check = kv.layer(cl);
  auto k_at = [&](const AgentSegment& a, int32_t i) {
    const int32_t s = a.slot0 + i;
    return check.k(a.blocks.table[s / bs], s % bs);
  };
  // Tokens [0, ranked) carry reused K/V; the n_last after them are recomputed whatever it is. A
  // caller that writes the reused K/V after the check pass ranks nothing (ratio 0).
  const int32_t ranked = options.ratio > 0 || !hooks.after_check ? std::max(0, n - options.n_last) : 0;
  const bool logits_now = cl + 1 == c.n_layer;  // no second pass: the check pass gives the logits

  // The check layer's reused K is kept aside: the check pass below overwrites it with the fresh K it
  // is compared with.
  std::vector<float> reused(size_t(n_agents) * size_t(n) * size_t(kvd));
  for (int64_t a = 0; a < n_agents; ++a)
    for (int32_t i = 0; i < ranked; ++i) kv_load(&reused[(size_t(a) * n + i) * kvd], k_at(agents[size_t(a)], i), kvd);

  // One batched pass of all agents' segment tokens through layers [0, check_layer], each agent's
  // tokens attending to its own prefix. Batch-invariant, so no agent's numbers depend on the others.
  Batch batch;
  batch.n_tile_tokens = 0;
  for (const AgentSegment& ag : agents) batch.seqs.push_back(ag.blocks);
  if (std::any_of(agents.begin(), agents.end(), [](const AgentSegment& ag) { return ag.context != nullptr; }))
    for (const AgentSegment& ag : agents) batch.contexts.push_back(ag.context);
  for (int64_t a = 0; a < n_agents; ++a)
    for (int32_t i = 0; i < n; ++i)
      batch.add(segment_tokens[i], agents[size_t(a)].pos0 + i, int32_t(a), agents[size_t(a)].slot0 + i,
                logits_now && last_logits && i == n - 1);
  std::vector<float> hidden(size_t(n_agents) * size_t(n) * size_t(c.n_embd));
  AGENTKV_TRY(model.forward_layers(batch, kv, 0, cl + 1, hidden.data(), logits_now ? last_logits : nullptr, pool));
  if (hooks.after_check) AGENTKV_TRY(hooks.after_check(hidden.data()));

  // Deviation and selection per agent; where asked, unselected tokens get the reused K/V back at the
  // layers the check pass rewrote (sharing's agent KV stays master + a diff of whole tokens).
  std::vector<float> row(static_cast<size_t>(kvd));
  std::vector<std::vector<int32_t>> selected(agents.size());
  for (int64_t a = 0; a < n_agents; ++a) {
    const AgentSegment& ag = agents[size_t(a)];
    AgentRecompute& r = out[size_t(a)];
    r.deviation.assign(size_t(n), 0.0f);
    for (int32_t i = 0; i < ranked; ++i)
      r.deviation[i] = squared_distance(k_at(ag, i), &reused[(size_t(a) * n + i) * kvd], kvd, row.data());
    selected[size_t(a)] = select_tokens(r.deviation, options.ratio, options.n_first, options.n_last);
    const std::vector<int32_t>& sel = selected[size_t(a)];
    int32_t next = 0;  // restores each run of unselected tokens between selected ones with one call
    for (size_t k = 0; hooks.restore && k <= sel.size(); ++k) {
      const int32_t end = k < sel.size() ? sel[k] : n;
      if (end > next) AGENTKV_TRY(hooks.restore(size_t(a), next, end));
      next = end + 1;
    }
    for (int32_t i : sel) r.recomputed_slots.push_back(ag.slot0 + i);
  }

  // The selected tokens of all agents resume from their check-layer hidden states in one pass
  // through the remaining layers, attending to their agent's prefix, the reused K/V of the
  // unselected tokens and each other.
  if (logits_now) return out;
  Batch rest;
  rest.n_tile_tokens = 0;
  rest.seqs = batch.seqs;
  rest.contexts = batch.contexts;
  std::vector<float> rest_hidden;
  for (int64_t a = 0; a < n_agents; ++a)
    for (int32_t i : selected[size_t(a)]) {
      rest.add(segment_tokens[i], agents[size_t(a)].pos0 + i, int32_t(a), agents[size_t(a)].slot0 + i,
               last_logits && i == n - 1);
      const auto row0 = hidden.begin() + (a * n + i) * int64_t(c.n_embd);
      rest_hidden.insert(rest_hidden.end(), row0, row0 + c.n_embd);
    }
  if (rest.size() > 0)
    AGENTKV_TRY(model.forward_layers(rest, kv, cl + 1, c.n_layer, rest_hidden.data(), last_logits, pool));
  return out;
}

}  // namespace

Result<std::vector<AgentRecompute>> recompute_deviating_tokens(const Model& model, const KvArena& kv,
                                                               std::span<const int32_t> segment_tokens,
                                                               std::span<const AgentSegment> agents,
                                                               const RecomputeOptions& options,
                                                               const RecomputeHooks& hooks, ThreadPool& pool) {
  AGENTKV_TRY(validate_reuse(model, kv, segment_tokens, agents, options));
  if (hooks.last_logits && (agents.size() != 1 || options.n_last < 1 || segment_tokens.empty()))
    return make_error("selective_recompute: last logits need one agent whose last token is recomputed");
  return recompute_checked(model, kv, segment_tokens, agents, options, hooks, pool);
}

Result<std::vector<AgentRecompute>> selective_recompute(const Model& model, const KvArena& kv,
                                                        const SegmentMaster& master,
                                                        std::span<const int32_t> segment_tokens,
                                                        std::span<const AgentSegment> agents,
                                                        const RecomputeOptions& options, ThreadPool& pool) {
  AGENTKV_TRY(validate_reuse(model, kv, segment_tokens, agents, options));
  const int32_t n = int32_t(segment_tokens.size());
  AGENTKV_TRY(validate_slot_range(master.slots, n, kv, "selective_recompute: master"));
  // Every agent starts from the master moved to its positions.
  for (const AgentSegment& ag : agents)
    AGENTKV_TRY(rerotate_kv(model, kv, master.slots, KvSlotRange{ag.blocks, ag.slot0}, n, ag.pos0 - master.pos0, pool));
  const int cl = options.check_layer;
  RecomputeHooks hooks;
  hooks.restore = [&](size_t a, int32_t begin, int32_t end) -> Status {
    const AgentSegment& ag = agents[a];
    return rerotate_kv(model, kv, KvSlotRange{master.slots.blocks, master.slots.slot0 + begin},
                       KvSlotRange{ag.blocks, ag.slot0 + begin}, end - begin, ag.pos0 - master.pos0, 0, cl + 1, pool);
  };
  return recompute_checked(model, kv, segment_tokens, agents, options, hooks, pool);
}

}  // namespace agentkv
