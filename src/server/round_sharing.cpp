// Collective KV sharing in /v1/rounds (TokenDance, issue 5). Every agent of a round reads the same
// block after its own context; instead of prefilling it once per agent, the server
//   1. prefills each agent's context up to the block (usually all reused from its resident KV) and
//      the block itself once per model as [BOS][block] (the master; the prefix cache keys it by
//      content, so a block seen before costs nothing),
//   2. runs the KV collector on the engine thread: the master re-rotated to every agent's position
//      and the most deviating tokens of all agents recomputed in one batched pass,
//   3. lets every agent's turn continue from its blended copy (marked approximate: it never serves
//      an exact prefix-cache hit),
//   4. keeps every agent's new context as master + sparse diff between rounds (master–diff storage,
//      Engine::compact_retained): its exact prefix blocks, the rows the collector recomputed for it
//      and its own turn packed, and a reference to the master; the next turn rebuilds it bit for bit.
// recompute = 1 recomputes every token and gives exactly the tokens of an exact round.
#include <future>
#include <map>
#include <set>

#include "engine/segment_collector.h"
#include "server/agent_job.h"
#include "util/monotonic_clock.h"

namespace agentkv {

bool ApiServer::share_segments(std::vector<AgentJob>& jobs, double recompute, HttpResponseWriter& w,
                               RoundSharingReport* report) {
  RoundSharingReport rep;
  rep.recompute = recompute;
  // Groups: one per model and block (the block is the same text for every agent, tokenized on its
  // own, so the same tokens; the key makes sure of it).
  std::map<std::pair<size_t, std::vector<int32_t>>, std::vector<size_t>> groups;
  std::string gate_reason;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const AgentJob& j = jobs[i];
    if (j.segment.first < 0 || j.segment.second <= j.segment.first) continue;
    if (!models_[j.model].sharing_allowed) {
      gate_reason = "model '" + models_[j.model].id + "' failed its start-up quality gate (" +
                    models_[j.model].gate_summary + ")";
      continue;
    }
    const auto& p = j.params.prompt;
    groups[{j.model, std::vector<int32_t>(p.begin() + j.segment.first, p.begin() + j.segment.second)}].push_back(i);
  }
  // One agent alone has nothing to share with.
  for (auto it = groups.begin(); it != groups.end();) it = it->second.size() < 2 ? groups.erase(it) : std::next(it);
  if (groups.empty()) {
    rep.reason = !gate_reason.empty() ? gate_reason : "fewer than two agents hold the round's block as a segment";
    if (report) *report = rep;
    return true;
  }

  // 1. Prefixes and masters, all in one engine run.
  struct Group {
    size_t model;
    std::vector<int32_t> segment;
    std::vector<size_t> members;
    size_t master_job;
    int32_t master_start;
  };
  std::vector<Group> gs;
  std::vector<AgentJob> pre;
  std::vector<size_t> prefix_job(jobs.size(), SIZE_MAX);
  for (auto& [key, members] : groups) {
    Group g{key.first, key.second, members, 0, 0};
    for (size_t i : members) {
      AgentJob p;
      p.model = jobs[i].model;
      p.params.prompt.assign(jobs[i].params.prompt.begin(), jobs[i].params.prompt.begin() + jobs[i].segment.first);
      p.params.max_tokens = 0;
      p.params.retain_kv = true;
      p.params.kv_from = jobs[i].params.kv_from;
      prefix_job[i] = pre.size();
      pre.push_back(std::move(p));
    }
    const Tokenizer& tok = *models_[g.model].lm->tokenizer;
    AgentJob m;
    m.model = g.model;
    if (tok.add_bos_default()) m.params.prompt.push_back(tok.bos_id());
    g.master_start = int32_t(m.params.prompt.size());
    m.params.prompt.insert(m.params.prompt.end(), g.segment.begin(), g.segment.end());
    m.params.max_tokens = 0;
    m.params.retain_kv = true;
    g.master_job = pre.size();
    pre.push_back(std::move(m));
    gs.push_back(std::move(g));
  }
  if (!run_jobs(pre, w)) return false;  // the client left; run_jobs gave everything back
  auto release_pre = [&] {
    for (const AgentJob& p : pre) release_kv(p.model, p.retained);
  };
  for (const AgentJob& p : pre)
    if (!p.error.empty() || p.retained == 0) {
      release_pre();
      agents_http::reply(w, p.error.empty()
                                ? api_error(ErrorCode::kInternal, "a prefill for KV sharing was not retained")
                                : api_error(p.error_code, p.error));
      return false;
    }

  // 2. The collector, one call per group on the engine thread; the prefix and master snapshots are
  //    released there right after (the blended copies hold what they need).
  RecomputeOptions ropt;
  ropt.ratio = recompute;
  for (Group& g : gs) {
    std::vector<uint64_t> prefixes;
    for (size_t i : g.members) prefixes.push_back(pre[prefix_job[i]].retained);
    const uint64_t master = pre[g.master_job].retained;
    auto done = std::make_shared<std::promise<Result<std::vector<CollectedCopy>>>>();
    auto fut = done->get_future();
    const std::vector<int32_t> segment = g.segment;
    const int32_t start = g.master_start;
    const double t0 = monotonic_seconds();
    const bool posted = loop_->post(
        [done, master, start, segment, prefixes, ropt](Engine& e) {
          auto res = collect_shared_segment(e, master, start, segment, prefixes, ropt);
          if (!res.ok()) e.release_retained(master);  // on success the agents' diffs will refer to it
          for (uint64_t h : prefixes) e.release_retained(h);
          done->set_value(std::move(res));
        },
        g.model);
    if (!posted) {  // shutting down: the loop drops every snapshot anyway
      for (const AgentJob& j : jobs) release_kv(j.model, j.blended);
      agents_http::reply(w, api_error(ErrorCode::kUnavailable, "the server is shutting down"));
      return false;
    }
    auto res = fut.get();
    rep.collector_seconds += monotonic_seconds() - t0;
    if (!res.ok()) {
      release_sharing(jobs, false);
      for (size_t later = size_t(&g - gs.data()) + 1; later < gs.size(); ++later) {
        for (size_t i : gs[later].members) release_kv(gs[later].model, pre[prefix_job[i]].retained);
        release_kv(gs[later].model, pre[gs[later].master_job].retained);
      }
      agents_http::reply(w, api_error(res.status_error()));
      return false;
    }
    for (size_t k = 0; k < g.members.size(); ++k) {
      AgentJob& j = jobs[g.members[k]];
      j.blended = (*res)[k].handle;
      j.params.kv_from = j.blended;
      j.master = master;
      j.master_start = start;
      for (int32_t slot : (*res)[k].recomputed_slots) j.diff_rows.push_back(slot - int32_t(j.segment.first));
      rep.recomputed_tokens += int64_t((*res)[k].recomputed_slots.size());
    }
    rep.agents += int(g.members.size());
    rep.segment_tokens = std::max<int64_t>(rep.segment_tokens, int64_t(g.segment.size()));
  }
  rep.mode = "tokendance";
  rep.reason = gate_reason;
  if (report) *report = rep;
  return true;
}

void ApiServer::release_sharing(std::vector<AgentJob>& jobs, bool compact) {
  // One task per model, posted before the server answers, so the agents' next requests (posted
  // later) find their contexts compacted or dense, never in between.
  std::map<size_t, std::vector<AgentJob*>> by_model;
  for (AgentJob& j : jobs)
    if (j.blended || j.master) by_model[j.model].push_back(&j);
  for (auto& [model, js] : by_model) {
    struct Item {
      uint64_t blended, retained, master;
      int64_t seg_begin;
      int32_t master_start;
      std::vector<int32_t> rows;
    };
    std::vector<Item> items;
    for (AgentJob* j : js) {
      items.push_back(Item{j->blended, compact ? j->retained : 0, j->master, j->segment.first, j->master_start,
                           std::move(j->diff_rows)});
      j->blended = j->master = 0;
    }
    loop_->post(
        [items = std::move(items)](Engine& e) mutable {
          std::set<uint64_t> masters;
          for (Item& it : items) {
            e.release_retained(it.blended);
            if (it.retained && it.master)
              e.compact_retained(it.retained, it.seg_begin, it.master, it.master_start, std::move(it.rows));
            if (it.master) masters.insert(it.master);
          }
          for (uint64_t m : masters) e.release_retained(m);  // the compact contexts hold forks of it
        },
        model);
  }
}

}  // namespace agentkv
