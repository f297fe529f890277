#include "bench_agents.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "engine/engine.h"
#include "engine/request_outcome.h"
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
RoundStats tokendance_stats(const TokendanceRoundOut& t, int round, int64_t bpb, int64_t budget_blocks) {
  RoundStats rs;
  rs.round = round;
  rs.agents = int(t.agents.size());
  std::vector<double> ttfts, kls;
  double nll_e = 0, nll_a = 0;
  int64_t scored_tokens = 0;
  for (const TokendanceAgentOut& a : t.agents) {
    rs.prompt_tokens += a.prompt_tokens;
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
  rs.collector_seconds = t.collector_seconds;
  rs.collector_per_agent_seconds = t.collector_per_agent_seconds;
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
  const double private_per_agent = double(t.resident_blocks - t.shared_blocks) / std::max(1, rs.agents);
  rs.max_agents_fit = private_per_agent > 0
                          ? std::max<int64_t>(0, int64_t(double(budget_blocks - t.shared_blocks) / private_per_agent))
                          : 0;
  return rs;
}

std::string ratio_label(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "td@%g", r);
  return buf;
}

Result<ModeReport> run_mode(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt,
                            const std::string& mode, double ratio, int64_t* budget_bytes, int64_t* bytes_per_block) {
  if (mode != "nocache" && mode != "prefix" && mode != "tokendance")
    return make_error("unknown mode '" + mode + "' (choose nocache, prefix, tokendance)");
  const bool tokendance = mode == "tokendance";
  EngineOptions eo;
  eo.kv.block_size = opt.block_size;
  eo.kv.mem_bytes = opt.kv_mem;
  eo.kv.prefix_caching = mode != "nocache";
  eo.scheduler.max_batch_tokens = opt.max_batch_tokens;
  std::unique_ptr<Engine> engine;
  AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(lm, eo, pool));
  std::unique_ptr<Workload> wl;
  AGENTKV_ASSIGN_OR_RETURN(wl, make_workload(opt.workload, opt.workload_opt));
  *budget_bytes = engine->kv().budget_bytes();
  *bytes_per_block = engine->kv().bytes_per_block();
  const int64_t bpb = engine->kv().bytes_per_block();
  const int64_t budget_blocks = engine->kv().pool().n_blocks();

  ModeReport rep;
  rep.mode = tokendance ? ratio_label(ratio) : mode;
  TokendanceOptions td;
  td.recompute.ratio = ratio;
  td.measure_quality = opt.quality;
  std::vector<double> all_ttft;
  int64_t turns_total = 0;
  for (int r = 0; r < wl->n_rounds(); ++r) turns_total += wl->n_agents();  // an estimate for the bar
  ProgressBar bar(lm.name + " " + opt.workload + " " + rep.mode, turns_total, opt.progress);
  int64_t turns_done = 0;

  for (int r = 0; r < wl->n_rounds(); ++r) {
    std::vector<AgentTurn> turns = wl->round(r);
    if (tokendance) {
      TokendanceRoundOut t;
      AGENTKV_ASSIGN_OR_RETURN(t, run_tokendance_round(*engine, pool, turns, td, true));
      RoundStats rs = tokendance_stats(t, r + 1, bpb, budget_blocks);
      for (const TokendanceAgentOut& a : t.agents) all_ttft.push_back(a.ttft);
      turns_done += int64_t(turns.size());
      bar.update(turns_done);
      wl->record(r, rs.replies);
      rep.rounds.push_back(std::move(rs));
      continue;
    }
    RoundStats rs;
    rs.round = r + 1;
    rs.agents = int(turns.size());
    const EngineMetrics m0 = engine->metrics();
    engine->kv().pool().reset_peak_used();
    struct Out {
      std::string text;
      std::vector<int32_t> tokens;
      double ttft = -1;
      bool done = false;
      std::string error;
    };
    std::vector<Out> outs(turns.size());
    std::vector<std::vector<int32_t>> prompts(turns.size());
    const double t0 = monotonic_seconds();
    for (size_t i = 0; i < turns.size(); ++i) {
      RequestParams p;
      prompts[i] = turn_tokens(*lm.tokenizer, turns[i]).all();
      p.prompt = prompts[i];
      p.max_tokens = turns[i].max_tokens;
      p.min_tokens = std::min(turns[i].min_tokens, turns[i].max_tokens);
      rs.prompt_tokens += int64_t(p.prompt.size());
      Out* o = &outs[i];
      auto id = engine->add_request(std::move(p), [o, t0, &bar, &turns_done](const RequestEvent& ev) {
        if (ev.has_token && o->ttft < 0) o->ttft = monotonic_seconds() - t0;
        if (answer_token(ev)) o->tokens.push_back(ev.token);
        o->text += ev.text;
        if (!ev.error.empty()) o->error = ev.error;
        if (ev.request_finished) {
          o->done = true;
          bar.update(++turns_done);
        }
      });
      if (!id.ok()) return make_error("round " + std::to_string(r + 1) + ", agent " + std::to_string(turns[i].agent) + ": " + id.error());
    }
    AGENTKV_TRY(engine->run_until_idle());
    rs.round_seconds = monotonic_seconds() - t0;
    std::vector<double> ttfts;
    std::vector<std::vector<int32_t>> contexts;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].error.empty()) return make_error("agent " + std::to_string(turns[i].agent) + ": " + outs[i].error);
      ttfts.push_back(outs[i].ttft);
      all_ttft.push_back(outs[i].ttft);
      rs.generated_tokens += int64_t(outs[i].tokens.size());
      rs.replies.push_back(outs[i].text);
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
    wl->record(r, rs.replies);
    rep.rounds.push_back(rs);
  }
  bar.finish();
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
    o.kv_bytes_per_agent_resident = std::max(o.kv_bytes_per_agent_resident, rs.kv_bytes_per_agent_resident);
    o.kv_bytes_per_agent_peak = std::max(o.kv_bytes_per_agent_peak, rs.kv_bytes_per_agent_peak);
    o.max_agents_fit = o.max_agents_fit == 0 ? rs.max_agents_fit : std::min(o.max_agents_fit, rs.max_agents_fit);
    o.segment_tokens += rs.segment_tokens * rs.agents;
    o.segment_recomputed += rs.segment_recomputed;
    o.collector_seconds += rs.collector_seconds;
    o.collector_per_agent_seconds += rs.collector_per_agent_seconds;
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
  if (s.round > 0) j.set("round", Json::number(s.round));
  j.set("agents", Json::number(s.agents));
  j.set("prompt_tokens", Json::number(double(s.prompt_tokens)));
  j.set("prefill_tokens_computed", Json::number(double(s.prefill_computed)));
  j.set("prefill_tokens_reused", Json::number(double(s.prefill_reused)));
  j.set("generated_tokens", Json::number(double(s.generated_tokens)));
  j.set("prefill_seconds", Json::number(s.prefill_seconds));
  j.set("round_latency_seconds", Json::number(s.round_seconds));
  j.set("ttft_p50_seconds", Json::number(s.ttft_p50));
  j.set("ttft_p99_seconds", Json::number(s.ttft_p99));
  j.set("kv_bytes_per_agent_resident", Json::number(s.kv_bytes_per_agent_resident));
  j.set("kv_bytes_per_agent_peak", Json::number(s.kv_bytes_per_agent_peak));
  j.set("cache_hit_rate", Json::number(s.hit_rate));
  j.set("preemptions", Json::number(double(s.preemptions)));
  j.set("max_agents_in_budget", Json::number(double(s.max_agents_fit)));
  if (s.segment_tokens > 0 || s.quality_agents > 0) {
    j.set("segment_tokens", Json::number(double(s.segment_tokens)));
    j.set("segment_tokens_recomputed", Json::number(double(s.segment_recomputed)));
    j.set("collector_seconds", Json::number(s.collector_seconds));
    j.set("collector_agent_by_agent_seconds", Json::number(s.collector_per_agent_seconds));
    j.set("quality_agents", Json::number(s.quality_agents));
    j.set("kl_mean", Json::number(s.kl_mean));
    j.set("kl_p95", Json::number(s.kl_p95));
    j.set("top1_agreement", Json::number(s.top1_agreement));
    j.set("greedy_agreement", Json::number(s.greedy_agreement));
    j.set("perplexity_exact", Json::number(s.ppl_exact));
    j.set("perplexity_tokendance", Json::number(s.ppl_approx));
  }
  if (with_replies) {
    Json rep = Json::array();
    for (auto& t : s.replies) rep.push(Json::string(t));
    j.set("replies", std::move(rep));
  }
  return j;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
  return buf;
}

}  // namespace

Result<BenchAgentsReport> run_bench_agents(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt) {
  if (opt.modes.empty()) return make_error("no --mode given");
  BenchAgentsReport rep;
  rep.model = lm.name;
  rep.workload = opt.workload;
  rep.threads = pool.size();
  for (const std::string& mode : opt.modes) {
    const std::vector<double> ratios = mode == "tokendance" ? opt.recompute : std::vector<double>{0};
    for (double ratio : ratios) {
      if (!(ratio >= 0 && ratio <= 1)) return make_error("recompute ratio must be in [0, 1]");
      ModeReport mr;
      AGENTKV_ASSIGN_OR_RETURN(mr, run_mode(lm, pool, opt, mode, ratio, &rep.kv_budget_bytes, &rep.bytes_per_block));
      rep.n_rounds = int(mr.rounds.size());
      rep.n_agents = mr.overall.agents;
      rep.modes.push_back(std::move(mr));
    }
  }
  return rep;
}

Json bench_agents_json(const BenchAgentsReport& r) {
  Json j = Json::object();
  j.set("model", Json::string(r.model));
  j.set("workload", Json::string(r.workload));
  j.set("agents", Json::number(r.n_agents));
  j.set("rounds", Json::number(r.n_rounds));
  j.set("threads", Json::number(r.threads));
  j.set("kv_budget_bytes", Json::number(double(r.kv_budget_bytes)));
  j.set("kv_bytes_per_block", Json::number(double(r.bytes_per_block)));
  Json modes = Json::array();
  for (const ModeReport& m : r.modes) {
    Json mj = Json::object();
    mj.set("mode", Json::string(m.mode));
    mj.set("overall", round_json(m.overall, false));
    Json rounds = Json::array();
    for (const RoundStats& s : m.rounds) rounds.push(round_json(s, true));
    mj.set("rounds", std::move(rounds));
    modes.push(std::move(mj));
  }
  j.set("modes", std::move(modes));
  return j;
}

std::string bench_agents_table(const BenchAgentsReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "bench-agents: %s, workload %s, %d agents, %d rounds, %d threads, KV budget %s\n",
                r.model.c_str(), r.workload.c_str(), r.n_agents, r.n_rounds, r.threads,
                human_bytes(double(r.kv_budget_bytes)).c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-8s %6s %9s %9s %9s %8s %9s %9s %9s %11s %11s %6s %8s %9s\n", "mode", "round",
                "prompt", "computed", "reused", "hit", "prefill_s", "round_s", "ttft_p50", "kv/agent", "peak/agent",
                "preem", "gen_tok", "max_agents");
  out += line;
  for (const ModeReport& m : r.modes) {
    auto row = [&](const RoundStats& s, const std::string& label) {
      std::snprintf(line, sizeof line, "%-8s %6s %9lld %9lld %9lld %7.1f%% %9.2f %9.2f %9.3f %11s %11s %6lld %8lld %9lld\n",
                    m.mode.c_str(), label.c_str(), (long long)s.prompt_tokens, (long long)s.prefill_computed,
                    (long long)s.prefill_reused, s.hit_rate * 100, s.prefill_seconds, s.round_seconds, s.ttft_p50,
                    human_bytes(s.kv_bytes_per_agent_resident).c_str(), human_bytes(s.kv_bytes_per_agent_peak).c_str(),
                    (long long)s.preemptions, (long long)s.generated_tokens, (long long)s.max_agents_fit);
      out += line;
    };
    for (const RoundStats& s : m.rounds) row(s, std::to_string(s.round));
    row(m.overall, "all");
  }
  bool any_td = false;
  for (const ModeReport& m : r.modes) any_td = any_td || m.overall.segment_tokens > 0;
  if (!any_td) return out;
  out += "\ntokendance: shared segment, its recompute, the collector, and quality against the exact context\n";
  std::snprintf(line, sizeof line, "%-8s %6s %8s %8s %11s %11s %9s %9s %7s %7s %9s %9s\n", "mode", "round", "segment",
                "recomp", "collector_s", "1-by-1_s", "kl_mean", "kl_p95", "top1", "greedy", "ppl_exact", "ppl_td");
  out += line;
  for (const ModeReport& m : r.modes) {
    if (m.overall.segment_tokens == 0) continue;
    auto row = [&](const RoundStats& s, const std::string& label) {
      const double seg_all = s.round ? double(s.segment_tokens * s.agents) : double(s.segment_tokens);
      std::snprintf(line, sizeof line, "%-8s %6s %8lld %7.1f%% %11.3f %11.3f %9.4f %9.4f %7.3f %7.3f %9.3f %9.3f\n",
                    m.mode.c_str(), label.c_str(), (long long)(s.round ? s.segment_tokens : s.segment_tokens),
                    seg_all > 0 ? 100.0 * double(s.segment_recomputed) / seg_all : 0.0, s.collector_seconds,
                    s.collector_per_agent_seconds, s.kl_mean, s.kl_p95, s.top1_agreement, s.greedy_agreement,
                    s.ppl_exact, s.ppl_approx);
      out += line;
    };
    for (const RoundStats& s : m.rounds) row(s, std::to_string(s.round));
    row(m.overall, "all");
  }
  return out;
}

Status bench_agents_plot(const BenchAgentsReport& r, const std::string& png_path) {
  std::vector<std::string> x;
  for (size_t i = 0; i < (r.modes.empty() ? 0 : r.modes[0].rounds.size()); ++i) x.push_back("round " + std::to_string(i + 1));
  auto per_round = [&](const std::string& title, const std::string& unit, auto field) {
    Chart c;
    c.kind = Chart::Kind::kBars;
    c.title = title;
    c.y_label = unit;
    c.x_labels = x;
    for (const ModeReport& m : r.modes) {
      ChartSeries s;
      s.name = m.mode;
      for (const RoundStats& rs : m.rounds) s.values.push_back(field(rs));
      s.values.resize(x.size(), 0.0);
      c.series.push_back(std::move(s));
    }
    return c;
  };
  std::vector<Chart> charts;
  charts.push_back(per_round("prefill tokens computed", "tokens", [](const RoundStats& s) { return double(s.prefill_computed); }));
  charts.push_back(per_round("round latency", "seconds", [](const RoundStats& s) { return s.round_seconds; }));
  charts.push_back(per_round("TTFT p50", "seconds", [](const RoundStats& s) { return s.ttft_p50; }));
  charts.push_back(per_round("KV per agent (resident)", "MiB", [](const RoundStats& s) { return s.kv_bytes_per_agent_resident / double(1 << 20); }));
  charts.push_back(per_round("prefix-cache hit rate", "%", [](const RoundStats& s) { return s.hit_rate * 100; }));
  charts.push_back(per_round("agents that fit the KV budget", "agents", [](const RoundStats& s) { return double(s.max_agents_fit); }));
  // With two or more recompute ratios: the quality curve against R (issue 5's report), with the
  // prefill time of each R and, as a flat reference, of prefix mode.
  std::vector<const ModeReport*> td;
  const ModeReport* prefix = nullptr;
  for (const ModeReport& m : r.modes) {
    if (m.mode.rfind("td@", 0) == 0 && m.overall.quality_agents > 0) td.push_back(&m);
    if (m.mode == "prefix") prefix = &m;
  }
  std::sort(td.begin(), td.end(), [](const ModeReport* a, const ModeReport* b) {
    return std::stod(a->mode.substr(3)) < std::stod(b->mode.substr(3));
  });
  if (td.size() >= 2) {
    auto curve = [&](const std::string& title, const std::string& unit,
                     std::vector<std::pair<std::string, std::function<double(const RoundStats&)>>> fields) {
      Chart c;
      c.kind = Chart::Kind::kLines;
      c.title = title;
      c.y_label = unit;
      for (const ModeReport* m : td) c.x_labels.push_back("R=" + m->mode.substr(3));
      for (auto& [name, f] : fields) {
        ChartSeries s;
        s.name = name;
        for (const ModeReport* m : td) s.values.push_back(f(m->overall));
        c.series.push_back(std::move(s));
      }
      return c;
    };
    charts.push_back(curve("KL(exact || shared) vs R", "nats",
                           {{"mean", [](const RoundStats& s) { return s.kl_mean; }},
                            {"p95", [](const RoundStats& s) { return s.kl_p95; }}}));
    charts.push_back(curve("agreement with exact vs R", "%",
                           {{"top-1 (teacher-forced)", [](const RoundStats& s) { return 100 * s.top1_agreement; }},
                            {"greedy, first 32", [](const RoundStats& s) { return 100 * s.greedy_agreement; }}}));
    Chart perp = curve("perplexity of the answers vs R", "ppl",
                       {{"exact context", [](const RoundStats& s) { return s.ppl_exact; }},
                        {"shared context", [](const RoundStats& s) { return s.ppl_approx; }}});
    charts.push_back(std::move(perp));
    Chart pf = curve("prefill time, all rounds, vs R", "seconds",
                     {{"tokendance", [](const RoundStats& s) { return s.prefill_seconds; }}});
    if (prefix) pf.series.push_back(ChartSeries{"prefix", std::vector<double>(td.size(), prefix->overall.prefill_seconds)});
    charts.push_back(std::move(pf));
  }
  for (Chart& c : charts) c.title = r.model + " " + r.workload + ": " + c.title;
  return write_charts_png(png_path, charts, 2);
}

}  // namespace agentkv
