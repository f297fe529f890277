// bench-agents: runs each KV mode over the workload's rounds on the engine and gathers the round
// statistics; writes them as a table and JSON, and hands the JSON to the chart script for --plot.
#include "bench_agents.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <unordered_map>

#include "engine/engine.h"
#include "engine/request_outcome.h"
#include "fit_search.h"
#include "percentile.h"
#include "tokendance_round.h"
#include "util/monotonic_clock.h"
#include "util/progress_bar.h"

namespace agentkv {

namespace {

struct Footprint {
  int64_t unique_blocks = 0;   // blocks if every context were resident at once
  int64_t shared_blocks = 0;   // of those, blocks that two or more agents' contexts would share
};

// What the agents' final contexts would occupy if they all stayed resident, counted the way the
// mode stores them: without a prefix cache each context owns its blocks; with one, full blocks with
// the same chained hash (same tokens after the same prefix) are stored once.
Footprint resident_footprint(const std::vector<std::vector<int32_t>>& contexts, const BlockPool& pool,
                             bool prefix) {
  Footprint f;
  const int64_t bs = pool.block_size();
  std::unordered_map<uint64_t, int> owners;
  for (const auto& ctx : contexts) {
    const int64_t full = int64_t(ctx.size()) / bs;
    const bool partial = int64_t(ctx.size()) % bs != 0;
    if (!prefix) {
      f.unique_blocks += full + (partial ? 1 : 0);
      continue;
    }
    uint64_t h = 0;
    for (int64_t b = 0; b < full; ++b) {
      h = pool.chain_hash(h, std::span<const int32_t>(ctx).subspan(size_t(b * bs), size_t(bs)), 0);
      ++owners[h];
    }
    if (partial) ++f.unique_blocks;
  }
  for (auto& [h, n] : owners) {
    ++f.unique_blocks;
    if (n > 1) ++f.shared_blocks;
  }
  return f;
}

// Round stats of a tokendance round from what run_tokendance_round measured.
RoundStats tokendance_stats(const TokendanceRoundOut& t, int round, int64_t bpb, int block_size,
                            int64_t budget_blocks) {
  RoundStats rs;
  rs.round = round;
  rs.agents = int(t.agents.size());
  std::vector<double> ttfts, kls;
  double nll_e = 0, nll_a = 0;
  int64_t scored_tokens = 0;
  int64_t private_tokens = 0;
  for (const TokendanceAgentOut& a : t.agents) {
    rs.prompt_tokens += a.prompt_tokens;
    private_tokens += a.private_tokens;
    rs.generated_tokens += int64_t(a.tokens.size());
    rs.replies.push_back(a.text);
    ttfts.push_back(a.ttft);
    rs.segment_recomputed += a.segment_recomputed;
    if (!a.has_quality) continue;
    ++rs.quality_agents;
    kls.insert(kls.end(), a.quality.kl.begin(), a.quality.kl.end());
    rs.top1_agreement += a.quality.top1_agreement * a.quality.n_positions;
    rs.greedy_agreement += a.greedy_agreement;
    nll_e += a.quality.nll_exact * a.quality.n_positions;
    nll_a += a.quality.nll_approx * a.quality.n_positions;
    scored_tokens += a.quality.n_positions;
  }
  if (scored_tokens > 0) {
    for (double k : kls) rs.kl_mean += k;
    rs.kl_mean /= double(kls.size());
    rs.kl_p95 = percentile(kls, 0.95);
    rs.top1_agreement /= double(scored_tokens);
    rs.ppl_exact = std::exp(nll_e / double(scored_tokens));
    rs.ppl_approx = std::exp(nll_a / double(scored_tokens));
  }
  if (rs.quality_agents) rs.greedy_agreement /= rs.quality_agents;
  rs.segment_tokens = t.segment_tokens;
  rs.diff_bytes_per_agent = double(t.diff_bytes) / std::max(1, rs.agents);
  rs.echo_tokens_per_agent = double(t.echo_tokens) / std::max(1, rs.agents);
  rs.diff_block_bytes_per_agent = double(t.diff_blocks * bpb) / std::max(1, rs.agents);
  rs.floor_bytes_per_agent = double(private_tokens) * double(bpb) / double(block_size) / std::max(1, rs.agents);
  rs.collector_seconds = t.collector_seconds;
  rs.collector_per_agent_seconds = t.collector_per_agent_seconds;
  rs.waves = t.waves;
  rs.master_context = t.master_context;
  rs.prefill_computed = t.prefill_computed;
  rs.prefill_reused = t.prefill_reused;
  rs.prefill_seconds = t.prefill_seconds;
  rs.round_seconds = t.round_seconds;
  rs.preemptions = t.preemptions;
  rs.hit_rate = rs.prompt_tokens ? double(rs.prefill_reused) / double(rs.prompt_tokens) : 0;
  rs.ttft_p50 = percentile(ttfts, 0.50);
  rs.ttft_p99 = percentile(ttfts, 0.99);
  rs.kv_bytes_per_agent_peak = double(t.peak_blocks * bpb) / std::max(1, rs.agents);
  rs.kv_bytes_per_agent_resident = double(t.resident_blocks * bpb) / std::max(1, rs.agents);
  if (rs.floor_bytes_per_agent > 0) rs.kv_over_floor = rs.kv_bytes_per_agent_resident / rs.floor_bytes_per_agent;
  const double private_per_agent = double(t.resident_blocks - t.shared_blocks) / std::max(1, rs.agents);
  rs.max_agents_fit = private_per_agent > 0
                          ? std::max<int64_t>(0, int64_t(double(budget_blocks - t.shared_blocks) / private_per_agent))
                          : 0;
  return rs;
}

std::string ratio_label(double r, DiffFormat f, std::optional<double> echo, MasterContext master) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "td@%g", r);
  std::string label = diff_format_lossless(f) ? buf : std::string(buf) + "/" + std::string(diff_format_name(f));
  if (echo) {
    std::snprintf(buf, sizeof buf, "/echo@%g", *echo);
    label += buf;
  }
  if (master != MasterContext::kBlock) label += std::string("/master@") + master_context_name(master);
  return label;
}

// One mode's run. `sample` (not empty): tokendance measures quality on these agents only; the other
// modes run only their turns and record `replay`'s messages (a tokendance run of the same workload) for
// every other agent.
Result<ModeReport> run_mode(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt,
                            const std::string& mode, double ratio, DiffFormat format, std::optional<double> echo,
                            int64_t* budget_bytes,
                            int64_t* bytes_per_block, const std::set<int>& sample = {},
                            const ModeReport* replay = nullptr) {
  if (mode != "nocache" && mode != "prefix" && mode != "tokendance")
    return make_error("unknown mode '" + mode + "' (choose nocache, prefix, tokendance)");
  const bool tokendance = mode == "tokendance";
  EngineOptions eo;
  eo.kv.block_size = opt.block_size;
  eo.kv.mem_bytes = opt.kv_mem;
  eo.kv.prefix_caching = mode != "nocache";
  eo.scheduler.max_batch_tokens = opt.max_batch_tokens;
  eo.diff_format = format;
  eo.resume_in_attention = opt.resume_in_attention;
  if (tokendance) {
    eo.echo_keep = echo;
    eo.master_context = opt.master_context;
  }
  std::unique_ptr<Engine> engine;
  AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(lm, eo, pool));
  std::unique_ptr<Workload> wl;
  AGENTKV_ASSIGN_OR_RETURN(wl, make_workload(opt.workload, opt.workload_opt));
  *budget_bytes = engine->kv().budget_bytes();
  *bytes_per_block = engine->kv().bytes_per_block();
  const int64_t bpb = engine->kv().bytes_per_block();
  const int64_t budget_blocks = engine->kv().pool().n_blocks();

  ModeReport rep;
  rep.mode = tokendance ? ratio_label(ratio, format, echo, opt.master_context) : mode;
  if (tokendance) rep.master_context = opt.master_context;
  rep.sampled_agents.assign(sample.begin(), sample.end());
  const bool sampled_run = !tokendance && !sample.empty();
  if (sampled_run) {
    if (!replay) return make_error("a sampled " + mode + " run needs a tokendance run to replay the other agents");
    rep.replayed_from = replay->mode;
  }
  TokendanceOptions td;
  td.recompute.ratio = ratio;
  td.measure_quality = opt.quality;
  td.quality_agents = sample;
  std::vector<double> all_ttft;
  int64_t turns_total = 0;  // an estimate for the bar
  for (int r = 0; r < wl->n_rounds(); ++r) turns_total += sampled_run ? int64_t(sample.size()) : wl->n_agents();
  ProgressBar bar(lm.name + " " + opt.workload + " " + rep.mode, turns_total, opt.progress);
  int64_t turns_done = 0;
  std::map<int, uint64_t> resident;  // tokendance: every agent's retained context, as the server keeps it
  std::map<int, std::vector<int32_t>> last_prompt;  // prefix mode: each agent's prompt of its last round

  // One round; a round that fails ends the mode's run, and the rounds before it are still reported. Its
  // errors do not name the round: the loop below does, once.
  auto run_round = [&](int r) -> Status {
    std::vector<AgentTurn> turns = wl->round(r);
    if (tokendance) {
      TokendanceRoundOut t;
      AGENTKV_ASSIGN_OR_RETURN(t, run_tokendance_round(*engine, pool, turns, td, opt.per_agent_timing, &resident));
      RoundStats rs = tokendance_stats(t, r + 1, bpb, opt.block_size, budget_blocks);
      for (const TokendanceAgentOut& a : t.agents) all_ttft.push_back(a.ttft);
      turns_done += int64_t(turns.size());
      bar.update(turns_done);
      wl->record(r, rs.replies);
      rep.rounds.push_back(std::move(rs));
      return {};
    }
    // A sampled run answers for its sample; every other agent says what it said in the replayed run.
    std::vector<std::string> replies(turns.size());
    std::vector<bool> runs(turns.size(), true);
    if (sampled_run) {
      if (size_t(r) >= replay->rounds.size() || replay->rounds[size_t(r)].replies.size() != turns.size())
        return make_error("the replayed run " + replay->mode +
                          " does not have a message for every agent");
      for (size_t i = 0; i < turns.size(); ++i) {
        runs[i] = sample.count(turns[i].agent) > 0;
        if (!runs[i]) replies[i] = replay->rounds[size_t(r)].replies[i];
      }
    }
    RoundStats rs;
    rs.round = r + 1;
    rs.agents = int(std::count(runs.begin(), runs.end(), true));
    const EngineMetrics m0 = engine->metrics();
    engine->kv().pool().reset_peak_used();
    struct Out {
      std::string text;
      std::vector<int32_t> tokens;
      double ttft = -1;
      int n_cached_prompt = 0;
      bool done = false;
      std::string error;
    };
    std::vector<Out> outs(turns.size());
    std::vector<std::vector<int32_t>> prompts(turns.size());
    const double t0 = monotonic_seconds();
    for (size_t i = 0; i < turns.size(); ++i) {
      if (!runs[i]) continue;
      RequestParams p;
      prompts[i] = turn_tokens(*lm.tokenizer, turns[i]).all();
      p.prompt = prompts[i];
      p.max_tokens = turns[i].max_tokens;
      p.min_tokens = std::min(turns[i].min_tokens, turns[i].max_tokens);
      rs.prompt_tokens += int64_t(p.prompt.size());
      Out* o = &outs[i];
      auto id = engine->add_request(std::move(p), [o, t0, &bar, &turns_done](const RequestEvent& ev) {
        if (ev.has_token && o->ttft < 0) o->ttft = monotonic_seconds() - t0;
        o->n_cached_prompt = std::max(o->n_cached_prompt, ev.n_cached_prompt);
        if (answer_token(ev)) o->tokens.push_back(ev.token);
        o->text += ev.text;
        if (!ev.error.empty()) o->error = ev.error;
        if (ev.request_finished) {
          o->done = true;
          bar.update(++turns_done);
        }
      });
      if (!id.ok()) return make_error(id.code(), "agent " + std::to_string(turns[i].agent) + ": " + id.error());
    }
    AGENTKV_TRY(engine->run_until_idle());
    rs.round_seconds = monotonic_seconds() - t0;
    std::vector<double> ttfts;
    std::vector<std::vector<int32_t>> contexts;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!runs[i]) continue;
      if (!outs[i].error.empty()) return make_error("agent " + std::to_string(turns[i].agent) + ": " + outs[i].error);
      // Evicted: the cache supplied less than the whole blocks this prompt shares with the agent's last
      // one (at most all but the prompt's last token, which is always computed).
      if (mode == "prefix") {
        if (auto prev = last_prompt.find(turns[i].agent); prev != last_prompt.end()) {
          const std::vector<int32_t>& a = prev->second;
          const std::vector<int32_t>& b = prompts[i];
          int64_t common = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
          common = std::min<int64_t>(common, int64_t(b.size()) - 1);
          if (outs[i].n_cached_prompt < common / opt.block_size * opt.block_size) ++rs.evicted_agents;
        }
        last_prompt[turns[i].agent] = prompts[i];
      }
      ttfts.push_back(outs[i].ttft);
      all_ttft.push_back(outs[i].ttft);
      rs.generated_tokens += int64_t(outs[i].tokens.size());
      rs.replies.push_back(outs[i].text);
      replies[i] = outs[i].text;
      std::vector<int32_t> ctx = prompts[i];
      ctx.insert(ctx.end(), outs[i].tokens.begin(), outs[i].tokens.end());
      contexts.push_back(std::move(ctx));
    }
    const EngineMetrics m1 = engine->metrics();
    rs.prefill_reused = int64_t(m1.prefix_hit_tokens - m0.prefix_hit_tokens);
    rs.prefill_computed = int64_t(m1.tokens_prefilled - m0.tokens_prefilled);
    rs.prefill_seconds = m1.prefill_seconds - m0.prefill_seconds;
    rs.preemptions = int64_t(m1.preemptions - m0.preemptions);
    rs.hit_rate = rs.prompt_tokens ? double(rs.prefill_reused) / double(rs.prompt_tokens) : 0;
    rs.ttft_p50 = percentile(ttfts, 0.50);
    rs.ttft_p99 = percentile(ttfts, 0.99);
    rs.kv_bytes_per_agent_peak = double(engine->kv().pool().stats().peak_used * bpb) / std::max(1, rs.agents);
    const Footprint fp = resident_footprint(contexts, engine->kv().pool(), mode == "prefix");
    rs.kv_bytes_per_agent_resident = double(fp.unique_blocks * bpb) / std::max(1, rs.agents);
    const double private_per_agent = double(fp.unique_blocks - fp.shared_blocks) / std::max(1, rs.agents);
    rs.max_agents_fit = private_per_agent > 0
                            ? std::max<int64_t>(0, int64_t(double(budget_blocks - fp.shared_blocks) / private_per_agent))
                            : 0;
    wl->record(r, replies);
    rep.rounds.push_back(rs);
    return {};
  };
  for (int r = 0; r < wl->n_rounds(); ++r) {
    if (Status st = run_round(r); !st.ok()) {
      rep.stopped = Error{st.code(), "round " + std::to_string(r + 1) + ", " + st.error()};
      break;
    }
  }
  bar.finish();
  // The leak check: every agent leaves, in a seeded random order, and nothing may stay referenced. A
  // stopped run may have left requests in the engine, so it has no leak check.
  if (!rep.stopped) {
    std::vector<uint64_t> handles;
    for (const auto& [agent, handle] : resident) handles.push_back(handle);
    rep.release_order_seed = 0x5eed0000u + uint64_t(wl->n_agents()) * 131u + uint64_t(wl->n_rounds());
    std::mt19937_64 rng(rep.release_order_seed);
    std::shuffle(handles.begin(), handles.end(), rng);
    for (uint64_t h : handles) engine->release_retained(h);
    rep.blocks_held_after_release = engine->kv().pool().stats().n_used;
    rep.snapshots_after_release = int64_t(engine->n_retained());
    if (rep.blocks_held_after_release != 0 || rep.snapshots_after_release != 0)
      return make_error(ErrorCode::kInternal,
                        rep.mode + ": KV leaked: " + std::to_string(rep.blocks_held_after_release) +
                            " blocks and " + std::to_string(rep.snapshots_after_release) +
                            " snapshots still held after every agent's context was released");
  }
  RoundStats& o = rep.overall;
  o.round = 0;
  for (const RoundStats& rs : rep.rounds) {
    o.agents = std::max(o.agents, rs.agents);
    o.prompt_tokens += rs.prompt_tokens;
    o.prefill_computed += rs.prefill_computed;
    o.prefill_reused += rs.prefill_reused;
    o.generated_tokens += rs.generated_tokens;
    o.prefill_seconds += rs.prefill_seconds;
    o.round_seconds += rs.round_seconds;
    o.preemptions += rs.preemptions;
    o.evicted_agents += rs.evicted_agents;
    o.kv_bytes_per_agent_resident = std::max(o.kv_bytes_per_agent_resident, rs.kv_bytes_per_agent_resident);
    o.kv_bytes_per_agent_peak = std::max(o.kv_bytes_per_agent_peak, rs.kv_bytes_per_agent_peak);
    o.max_agents_fit = o.max_agents_fit == 0 ? rs.max_agents_fit : std::min(o.max_agents_fit, rs.max_agents_fit);
    o.segment_tokens += rs.segment_tokens * rs.agents;
    o.segment_recomputed += rs.segment_recomputed;
    o.collector_seconds += rs.collector_seconds;
    o.collector_per_agent_seconds += rs.collector_per_agent_seconds;
    o.waves = std::max(o.waves, rs.waves);
    o.diff_bytes_per_agent = std::max(o.diff_bytes_per_agent, rs.diff_bytes_per_agent);
    o.echo_tokens_per_agent += rs.echo_tokens_per_agent;
    o.floor_bytes_per_agent = std::max(o.floor_bytes_per_agent, rs.floor_bytes_per_agent);
    o.kv_over_floor = std::max(o.kv_over_floor, rs.kv_over_floor);
    o.diff_block_bytes_per_agent = std::max(o.diff_block_bytes_per_agent, rs.diff_block_bytes_per_agent);
    if (rs.quality_agents) {
      // Weighted by agents; the per-round values are already means over their answers.
      o.kl_mean += rs.kl_mean * rs.quality_agents;
      o.kl_p95 = std::max(o.kl_p95, rs.kl_p95);
      o.top1_agreement += rs.top1_agreement * rs.quality_agents;
      o.greedy_agreement += rs.greedy_agreement * rs.quality_agents;
      o.ppl_exact += std::log(std::max(rs.ppl_exact, 1e-300)) * rs.quality_agents;
      o.ppl_approx += std::log(std::max(rs.ppl_approx, 1e-300)) * rs.quality_agents;
      o.quality_agents += rs.quality_agents;
    }
  }
  if (o.quality_agents) {
    o.kl_mean /= o.quality_agents;
    o.top1_agreement /= o.quality_agents;
    o.greedy_agreement /= o.quality_agents;
    o.ppl_exact = std::exp(o.ppl_exact / o.quality_agents);
    o.ppl_approx = std::exp(o.ppl_approx / o.quality_agents);
  }
  o.hit_rate = o.prompt_tokens ? double(o.prefill_reused) / double(o.prompt_tokens) : 0;
  o.ttft_p50 = percentile(all_ttft, 0.50);
  o.ttft_p99 = percentile(all_ttft, 0.99);
  return rep;
}

Json round_json(const RoundStats& s, bool with_replies) {
  Json j = Json::object();
  if (s.round > 0) j["round"] = s.round;
  j["agents"] = s.agents;
  j["prompt_tokens"] = s.prompt_tokens;
  j["prefill_tokens_computed"] = s.prefill_computed;
  j["prefill_tokens_reused"] = s.prefill_reused;
  j["generated_tokens"] = s.generated_tokens;
  j["prefill_seconds"] = s.prefill_seconds;
  // Per agent, so that a sampled mode compares with a whole one.
  j["prefill_tokens_computed_per_agent"] = s.agents ? double(s.prefill_computed) / s.agents : 0.0;
  j["prefill_seconds_per_agent"] = s.agents ? s.prefill_seconds / s.agents : 0.0;
  j["round_latency_seconds"] = s.round_seconds;
  j["ttft_p50_seconds"] = s.ttft_p50;
  j["ttft_p99_seconds"] = s.ttft_p99;
  j["kv_bytes_per_agent_resident"] = s.kv_bytes_per_agent_resident;
  j["kv_bytes_per_agent_peak"] = s.kv_bytes_per_agent_peak;
  j["cache_hit_rate"] = s.hit_rate;
  j["preemptions"] = s.preemptions;
  j["max_agents_in_budget"] = s.max_agents_fit;
  if (s.segment_tokens > 0 || s.quality_agents > 0) {
    j["segment_tokens"] = s.segment_tokens;
    j["segment_tokens_recomputed"] = s.segment_recomputed;
    j["collector_seconds"] = s.collector_seconds;
    j["collector_agent_by_agent_seconds"] = s.collector_per_agent_seconds;
    j["waves"] = s.waves;
    if (!s.master_context.empty()) j["master_context"] = s.master_context;
    j["diff_bytes_per_agent"] = s.diff_bytes_per_agent;
    j["echo_tokens_per_agent"] = s.echo_tokens_per_agent;
    j["diff_block_bytes_per_agent"] = s.diff_block_bytes_per_agent;
    j["floor_bytes_per_agent"] = s.floor_bytes_per_agent;
    j["kv_over_floor"] = s.kv_over_floor;
    j["quality_agents"] = s.quality_agents;
    j["kl_mean"] = s.kl_mean;
    j["kl_p95"] = s.kl_p95;
    j["top1_agreement"] = s.top1_agreement;
    j["greedy_agreement"] = s.greedy_agreement;
    j["perplexity_exact"] = s.ppl_exact;
    j["perplexity_tokendance"] = s.ppl_approx;
  }
  if (with_replies) j["replies"] = s.replies;
  return j;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
  return buf;
}

// Whether an error is the KV budget's refusal (engine/kv_admission.h; a round's error may have lost its
// code on the way, its message has not).
bool budget_refusal(const Error& e) {
  return e.code == ErrorCode::kResourceExhausted || e.code == ErrorCode::kKvPinned ||
         e.message.find("KV budget") != std::string::npos;
}

// The agents that fit the budget, found by running the workload (quality not measured): the largest
// agent count in the workload's range whose run neither preempted, nor was refused, nor had a round
// split into waves (collective_round.h: its turns did not fit the budget at once).
Status find_agents_that_fit(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt,
                            const std::string& mode, double ratio, DiffFormat format, std::optional<double> echo,
                            ModeReport& rep) {
  BenchAgentsOptions o = opt;
  o.quality = false;
  o.progress = false;
  o.per_agent_timing = false;  // nothing kept past its use: the round holds what serving would
  auto run = [&](int n) -> Result<bool> {
    o.workload_opt.n_agents = n;
    int64_t budget = 0, bpb = 0;
    FitTrial t;
    t.agents = n;
    const double t0 = monotonic_seconds();
    auto r = run_mode(lm, pool, o, mode, ratio, format, echo, &budget, &bpb);
    if (r.ok() && r->stopped) {
      Error stop = *r->stopped;  // a round that failed: refused by the budget or not, as an error is
      r = std::move(stop);
    }
    if (!r.ok()) {
      if (!budget_refusal(r.status_error()))
        return make_error("finding the agents that fit, " + std::to_string(n) + " agents: " + r.error());
      t.refused = r.error();
    } else {
      t.preemptions = r->overall.preemptions;
      t.waves = r->overall.waves;
      if (!r->rounds.empty()) t.last_round_hit_rate = r->rounds.back().hit_rate;
      for (const RoundStats& rs : r->rounds) t.evicted_agents += rs.evicted_agents;
      // Holding an agent means keeping its context: tokendance retains them (a round that cannot, is
      // refused or splits into waves), prefix caching may evict one and prefill it again next round.
      t.fits = t.preemptions == 0 && t.waves <= 1 && t.evicted_agents == 0;
    }
    rep.fit_trials.push_back(t);
    // One line per trial as it ends, even when quiet: a search at large counts runs for hours.
    std::fprintf(stderr, "find-fit %s: %d agents %s (%.0f s; last round's cache hit rate %.1f%%, %lld turns found their history evicted)\n",
                 rep.mode.c_str(), n,
                 !t.refused.empty()    ? "refused"
                 : t.fits              ? "fit"
                 : t.preemptions > 0   ? "preempted"
                 : t.evicted_agents > 0 ? "evicted histories"
                                        : "ran in waves",
                 monotonic_seconds() - t0, 100.0 * t.last_round_hit_rate, (long long)t.evicted_agents);
    return t.fits;
  };
  // The workload's agent range, from its own checks.
  auto in_range = [&](int n) -> Result<bool> {
    WorkloadOptions w = opt.workload_opt;
    w.n_agents = n;
    return make_workload(opt.workload, w).ok();
  };
  int lo = 2;
  while (!in_range(lo).value() && lo < 64) ++lo;
  int hi = 0;
  AGENTKV_ASSIGN_OR_RETURN(hi, largest_where(lo, 1 << 20, in_range));
  if (auto from = opt.fit_from.find(mode); from != opt.fit_from.end()) {
    int n = 0;
    AGENTKV_ASSIGN_OR_RETURN(n, largest_where_from(lo, hi, from->second, run));
    rep.agents_fit_by_running = std::max(n, 0);
    return {};
  }
  bool ok = false;
  AGENTKV_ASSIGN_OR_RETURN(ok, run(lo));
  if (!ok) {
    rep.agents_fit_by_running = 0;
    return {};
  }
  AGENTKV_ASSIGN_OR_RETURN(rep.agents_fit_by_running, largest_where(lo, hi, run));
  return {};
}

}  // namespace

std::set<int> sample_of_agents(int n_agents, int k, uint64_t seed) {
  std::vector<int> ids(size_t(std::max(0, n_agents)));
  for (int i = 0; i < n_agents; ++i) ids[size_t(i)] = i;
  if (k <= 0 || k >= n_agents) return {ids.begin(), ids.end()};
  // A partial Fisher-Yates shuffle; mt19937_64's sequence is fixed by the standard, so a seed names
  // the same sample on every platform.
  std::mt19937_64 rng(seed ^ 0x5a4d504c45ull);
  for (int i = 0; i < k; ++i) std::swap(ids[size_t(i)], ids[size_t(i) + size_t(rng() % uint64_t(n_agents - i))]);
  return {ids.begin(), ids.begin() + k};
}

Result<BenchAgentsReport> run_bench_agents(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt,
                                           BenchAgentsReport* what_ran) {
  if (opt.modes.empty()) return make_error("no --mode given");
  BenchAgentsReport rep;
  rep.model = lm.name;
  rep.workload = opt.workload;
  rep.threads = pool.size();
  std::set<int> sample;
  std::vector<std::string> modes = opt.modes;
  if (opt.sample > 0) {
    std::unique_ptr<Workload> wl;
    AGENTKV_ASSIGN_OR_RETURN(wl, make_workload(opt.workload, opt.workload_opt));
    if (opt.sample < wl->n_agents()) {
      sample = sample_of_agents(wl->n_agents(), opt.sample, opt.workload_opt.seed);
      // The sampled modes replay the first tokendance run's messages, so tokendance runs first.
      std::stable_partition(modes.begin(), modes.end(), [](const std::string& m) { return m == "tokendance"; });
      if (modes.front() != "tokendance")
        return make_error("--sample needs a tokendance mode: the other modes run only the sampled agents and take "
                          "everyone else's messages from the tokendance run");
    }
  }
  for (const std::string& mode : modes) {
    const std::vector<double> ratios = mode == "tokendance" ? opt.recompute : std::vector<double>{0};
    const std::vector<DiffFormat> formats = mode == "tokendance" ? opt.diff_formats : std::vector<DiffFormat>{DiffFormat::kF16};
    const std::vector<std::optional<double>> echoes =
        mode == "tokendance" ? opt.echo_keeps : std::vector<std::optional<double>>{std::nullopt};
    for (double ratio : ratios) {
      if (!(ratio >= 0 && ratio <= 1)) return make_error("recompute ratio must be in [0, 1]");
      for (DiffFormat format : formats) {
        for (std::optional<double> echo : echoes) {
          ModeReport mr;
          AGENTKV_ASSIGN_OR_RETURN(mr, run_mode(lm, pool, opt, mode, ratio, format, echo, &rep.kv_budget_bytes,
                                                &rep.bytes_per_block, sample,
                                                rep.modes.empty() ? nullptr : &rep.modes.front()));
          rep.n_rounds = std::max(rep.n_rounds, int(mr.rounds.size()));
          rep.n_agents = std::max(rep.n_agents, mr.overall.agents);
          if (mr.stopped) {  // no fit search after a run that failed
            const Error e{mr.stopped->code, mr.mode + " stopped, " + mr.stopped->message};
            rep.modes.push_back(std::move(mr));
            if (what_ran) *what_ran = std::move(rep);
            return e;
          }
          if (opt.find_fit) AGENTKV_TRY(find_agents_that_fit(lm, pool, opt, mode, ratio, format, echo, mr));
          rep.modes.push_back(std::move(mr));
        }
      }
    }
  }
  return rep;
}

void to_json(Json& j, const ModeReport& m) {
  Json rounds = Json::array();
  for (const RoundStats& s : m.rounds) rounds.push_back(round_json(s, true));
  j = {{"mode", m.mode}, {"overall", round_json(m.overall, false)}, {"rounds", std::move(rounds)}};
  if (!m.sampled_agents.empty()) j["sampled_agents"] = m.sampled_agents;
  if (!m.replayed_from.empty()) j["replayed_from"] = m.replayed_from;
  if (m.stopped) j["stopped"] = {{"after_rounds", m.rounds.size()}, {"error", m.stopped->message}};
  if (m.blocks_held_after_release >= 0)
    j["after_release"] = {{"blocks_held", m.blocks_held_after_release},
                          {"snapshots_held", m.snapshots_after_release},
                          {"release_order_seed", m.release_order_seed}};
  if (m.agents_fit_by_running >= 0) {
    Json trials = Json::array();
    for (const FitTrial& t : m.fit_trials) {
      Json x = {{"agents", t.agents}, {"fits", t.fits}, {"preemptions", t.preemptions}};
      if (t.waves > 0) x["waves"] = t.waves;
      if (!t.refused.empty()) {
        x["refused"] = t.refused;
      } else {
        x["last_round_hit_rate"] = t.last_round_hit_rate;
        x["evicted_turns"] = t.evicted_agents;
      }
      trials.push_back(std::move(x));
    }
    j["agents_fit_by_running"] = m.agents_fit_by_running;
    j["fit_trials"] = std::move(trials);
  }
}

void to_json(Json& j, const BenchAgentsReport& r) {
  j = {{"model", r.model},
       {"workload", r.workload},
       {"agents", r.n_agents},
       {"rounds", r.n_rounds},
       {"threads", r.threads},
       {"kv_budget_bytes", r.kv_budget_bytes},
       {"kv_bytes_per_block", r.bytes_per_block},
       {"modes", r.modes}};
}

std::string bench_agents_table(const BenchAgentsReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "bench-agents: %s, workload %s, %d agents, %d rounds, %d threads, KV budget %s\n",
                r.model.c_str(), r.workload.c_str(), r.n_agents, r.n_rounds, r.threads,
                human_bytes(double(r.kv_budget_bytes)).c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-13s %6s %6s %9s %9s %9s %8s %9s %9s %9s %9s %9s %11s %11s %6s %8s %9s\n", "mode",
                "round", "agents", "prompt", "computed", "reused", "hit", "comp/ag", "prefill_s", "pf_s/ag", "round_s",
                "ttft_p50", "kv/agent", "peak/agent", "preem", "gen_tok", "max_agents");
  out += line;
  for (const ModeReport& m : r.modes) {
    auto row = [&](const RoundStats& s, const std::string& label) {
      const double ag = std::max(1, s.agents);
      std::snprintf(line, sizeof line,
                    "%-13s %6s %6d %9lld %9lld %9lld %7.1f%% %9.0f %9.2f %9.3f %9.2f %9.3f %11s %11s %6lld %8lld %9lld\n",
                    m.mode.c_str(), label.c_str(), s.agents, (long long)s.prompt_tokens, (long long)s.prefill_computed,
                    (long long)s.prefill_reused, s.hit_rate * 100, double(s.prefill_computed) / ag, s.prefill_seconds,
                    s.prefill_seconds / ag, s.round_seconds, s.ttft_p50, human_bytes(s.kv_bytes_per_agent_resident).c_str(),
                    human_bytes(s.kv_bytes_per_agent_peak).c_str(), (long long)s.preemptions,
                    (long long)s.generated_tokens, (long long)s.max_agents_fit);
      out += line;
    };
    for (const RoundStats& s : m.rounds) row(s, std::to_string(s.round));
    row(m.overall, "all");
  }
  for (const ModeReport& m : r.modes) {
    if (m.sampled_agents.empty()) continue;
    std::string ids;
    for (size_t i = 0; i < m.sampled_agents.size() && i < 12; ++i) {
      if (i) ids += ' ';
      ids += std::to_string(m.sampled_agents[i]);
    }
    if (m.sampled_agents.size() > 12) ids += " ...";
    std::snprintf(line, sizeof line, "%-13s %s on a sample of %zu of %d agents (%s)%s%s\n", m.mode.c_str(),
                  m.replayed_from.empty() ? "quality measured" : "ran", m.sampled_agents.size(), r.n_agents, ids.c_str(),
                  m.replayed_from.empty() ? "" : "; the others' messages replayed from ",
                  m.replayed_from.c_str());
    out += line;
  }
  for (const ModeReport& m : r.modes) {
    std::string split;
    for (const RoundStats& s : m.rounds)
      if (s.waves > 1) split += (split.empty() ? "" : ", ") + std::string("round ") + std::to_string(s.round) + ": " +
                                std::to_string(s.waves);
    if (split.empty()) continue;
    std::snprintf(line, sizeof line, "%-13s rounds run in waves, the KV budget not holding every turn at once (%s)\n",
                  m.mode.c_str(), split.c_str());
    out += line;
  }
  for (const ModeReport& m : r.modes) {
    if (m.master_context != MasterContext::kAgent) continue;
    std::string fell;
    for (const RoundStats& s : m.rounds)
      if (s.master_context == "block") fell += (fell.empty() ? "" : ", ") + std::to_string(s.round);
    if (fell.empty()) continue;
    std::snprintf(line, sizeof line,
                  "%-13s masters computed as [BOS][block] in rounds %s: an agent's context would have crowded the "
                  "KV budget\n",
                  m.mode.c_str(), fell.c_str());
    out += line;
  }
  for (const ModeReport& m : r.modes) {
    if (!m.stopped) continue;
    std::snprintf(line, sizeof line, "%-13s stopped after %zu rounds: ", m.mode.c_str(), m.rounds.size());
    out += line + m.stopped->message + "\n";
  }
  {
    std::string modes;
    for (const ModeReport& m : r.modes)
      if (m.blocks_held_after_release == 0 && m.snapshots_after_release == 0) modes += (modes.empty() ? "" : ", ") + m.mode;
    if (!modes.empty()) out += "after every agent left (seeded random order): 0 KV blocks held (" + modes + ")\n";
  }
  for (const ModeReport& m : r.modes) {
    if (m.agents_fit_by_running < 0) continue;
    std::string tried;
    for (const FitTrial& t : m.fit_trials)
      tried += (tried.empty() ? "" : ", ") + std::to_string(t.agents) +
               (t.fits                 ? " fit"
                : !t.refused.empty()   ? " refused"
                : t.preemptions > 0    ? " preempted " + std::to_string(t.preemptions) + "x"
                : t.evicted_agents > 0 ? " " + std::to_string(t.evicted_agents) + " histories evicted"
                                       : " in " + std::to_string(t.waves) + " waves");
    std::snprintf(line, sizeof line, "%-13s agents that fit the budget, found by running: %d (tried %s)\n", m.mode.c_str(),
                  m.agents_fit_by_running, tried.c_str());
    out += line;
  }
  bool any_td = false;
  for (const ModeReport& m : r.modes) any_td = any_td || m.overall.segment_tokens > 0;
  if (!any_td) return out;
  out += "\ntokendance: shared segment, its recompute, the collector, and quality against the exact context\n";
  std::snprintf(line, sizeof line, "%-13s %6s %8s %8s %11s %11s %10s %10s %10s %8s %9s %9s %7s %7s %9s %9s\n", "mode",
                "round", "segment", "recomp", "collector_s", "1-by-1_s", "diff/agent", "blocks/ag", "floor/ag", "kv/floor",
                "kl_mean", "kl_p95", "top1", "greedy", "ppl_exact", "ppl_td");
  out += line;
  for (const ModeReport& m : r.modes) {
    if (m.overall.segment_tokens == 0) continue;
    int64_t turns = 0;  // the overall row's segment is the mean per turn (RoundStats keeps the total)
    for (const RoundStats& s : m.rounds) turns += s.agents;
    auto row = [&](const RoundStats& s, const std::string& label) {
      const double seg_all = s.round ? double(s.segment_tokens * s.agents) : double(s.segment_tokens);
      std::snprintf(line, sizeof line,
                    "%-13s %6s %8lld %7.1f%% %11.3f %11.3f %10s %10s %10s %8.3f %9.4f %9.4f %7.3f %7.3f %9.3f %9.3f\n",
                    m.mode.c_str(), label.c_str(),
                    (long long)(s.round ? s.segment_tokens : s.segment_tokens / std::max<int64_t>(1, turns)),
                    seg_all > 0 ? 100.0 * double(s.segment_recomputed) / seg_all : 0.0, s.collector_seconds,
                    s.collector_per_agent_seconds, human_bytes(s.diff_bytes_per_agent).c_str(),
                    human_bytes(s.diff_block_bytes_per_agent).c_str(), human_bytes(s.floor_bytes_per_agent).c_str(),
                    s.kv_over_floor, s.kl_mean, s.kl_p95, s.top1_agreement,
                    s.greedy_agreement, s.ppl_exact, s.ppl_approx);
      out += line;
    };
    for (const RoundStats& s : m.rounds) row(s, std::to_string(s.round));
    row(m.overall, "all");
  }
  return out;
}

namespace {

// The defaults come from CMake: the python3 that imports matplotlib and the source tree's scripts/.
std::string plot_python() {
  const char* env = std::getenv("AGENTKV_PYTHON");
  return env && *env ? env : AGENTKV_PLOT_PYTHON;
}

std::string plot_script() {
  const char* env = std::getenv("AGENTKV_SCRIPTS");
  return std::string(env && *env ? env : AGENTKV_SCRIPTS_DIR) + "/plot_bench_agents.py";
}

// Runs argv[0] (looked up on PATH) and waits; quiet sends its stdout and stderr to /dev/null.
// Returns the exit status, 127 when it cannot be started, 128 + N when killed by signal N.
int run_process(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

Status check_bench_agents_plot() {
  const std::string python = plot_python(), script = plot_script();
  const int rc = run_process({python, "-c", "import matplotlib"}, true);
  if (rc == 127)
    return make_error("--plot needs python3 (Debian package python3): cannot run '" + python +
                      "' (set AGENTKV_PYTHON to another interpreter)");
  if (rc != 0)
    return make_error("--plot needs matplotlib (Debian package python3-matplotlib): '" + python +
                      "' cannot import it (set AGENTKV_PYTHON to a python3 that can)");
  if (access(script.c_str(), R_OK) != 0)
    return make_error("--plot: cannot read " + script + " (set AGENTKV_SCRIPTS to the scripts/ folder of the agentkv sources)");
  return Status::ok_status();
}

Status bench_agents_plot(const std::string& json_path, const std::string& png_path) {
  AGENTKV_TRY(check_bench_agents_plot());
  const std::string script = plot_script();
  // The script prints its own error (naming the report) before a non-zero exit.
  if (const int rc = run_process({plot_python(), script, json_path, png_path}, false); rc != 0)
    return make_error(script + " exited with status " + std::to_string(rc) + " drawing " + png_path);
  return Status::ok_status();
}

}  // namespace agentkv
