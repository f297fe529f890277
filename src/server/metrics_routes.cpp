// GET /metrics (Prometheus text: the engines' counters, gauges and latency histograms per model, and
// the resident agents) and GET /health.
#include <cstdio>

#include "server/routes.h"

namespace agentkv {

namespace {

std::string metrics_text(const ServerState& s) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string& name, const std::string& model, double v, const std::string& extra = "") {
    char num[64];
    std::snprintf(num, sizeof num, "%.17g", v);
    out += name + "{model=\"" + model + "\"" + extra + "} " + num + "\n";
  };
  std::vector<EngineMetrics> ms;
  for (size_t i = 0; i < s.models.size(); ++i) ms.push_back(s.loop->metrics(i));
  struct Row {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const EngineMetrics&);
  };
  static const Row rows[] = {
      {"agentkv_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
       [](const EngineMetrics& m) { return double(m.prefix_query_tokens); }},
      {"agentkv_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
       [](const EngineMetrics& m) { return double(m.prefix_hit_tokens); }},
      {"agentkv_kv_blocks_used", "gauge", "KV blocks referenced by sequences.",
       [](const EngineMetrics& m) { return double(m.blocks_used); }},
      {"agentkv_kv_blocks_pinned", "gauge",
       "KV blocks pinned by resident contexts (agents): neither running requests nor reclaimable caches.",
       [](const EngineMetrics& m) { return double(m.blocks_pinned); }},
      {"agentkv_kv_blocks_free", "gauge", "KV blocks free (cached or empty).",
       [](const EngineMetrics& m) { return double(m.blocks_free); }},
      {"agentkv_kv_blocks_cached", "gauge", "KV blocks in the prefix cache.",
       [](const EngineMetrics& m) { return double(m.blocks_cached); }},
      {"agentkv_kv_blocks_total", "gauge", "KV blocks in the budget.",
       [](const EngineMetrics& m) { return double(m.blocks_total); }},
      {"agentkv_preemptions_total", "counter", "Sequences preempted for recompute.",
       [](const EngineMetrics& m) { return double(m.preemptions); }},
      {"agentkv_tokens_prefilled_total", "counter", "Tokens computed without sampling.",
       [](const EngineMetrics& m) { return double(m.tokens_prefilled); }},
      {"agentkv_tokens_decoded_total", "counter", "Tokens sampled.",
       [](const EngineMetrics& m) { return double(m.tokens_decoded); }},
      {"agentkv_requests_running", "gauge", "Requests with sequences running.",
       [](const EngineMetrics& m) { return double(m.requests_running); }},
      {"agentkv_requests_waiting", "gauge", "Sequences waiting for admission.",
       [](const EngineMetrics& m) { return double(m.requests_waiting); }},
      {"agentkv_requests_finished_total", "counter", "Requests finished.",
       [](const EngineMetrics& m) { return double(m.requests_finished); }},
      {"agentkv_requests_cancelled_total", "counter", "Requests cancelled.",
       [](const EngineMetrics& m) { return double(m.requests_cancelled); }},
      {"agentkv_kv_retained_contexts", "gauge", "Retained KV snapshots (agents' pinned contexts).",
       [](const EngineMetrics& m) { return double(m.retained_snapshots); }},
      {"agentkv_kv_retained_compact_contexts", "gauge",
       "Retained contexts kept as master + sparse diff (collective KV sharing) between rounds.",
       [](const EngineMetrics& m) { return double(m.retained_compact); }},
      {"agentkv_kv_retained_compact_blocks", "gauge",
       "Blocks those compact contexts hold on their own (diff rows and their own turns).",
       [](const EngineMetrics& m) { return double(m.retained_compact_blocks); }},
      {"agentkv_kv_retained_diff_bytes", "gauge",
       "Bytes of those compact contexts' diff rows in their diff format (--diff-format), before rounding to blocks.",
       [](const EngineMetrics& m) { return double(m.retained_diff_bytes); }},
      {"agentkv_echo_tokens_total", "counter",
       "Tokens of agents' own answers stored as echoes (--echo-keep): a later round's block master's rows plus a "
       "share of diff rows.",
       [](const EngineMetrics& m) { return double(m.echo_tokens); }},
      {"agentkv_kv_retained_tokens", "gauge", "Tokens in retained KV snapshots.",
       [](const EngineMetrics& m) { return double(m.retained_tokens); }},
      {"agentkv_kv_block_bytes", "gauge", "Bytes of K/V values per block.",
       [](const EngineMetrics& m) { return double(m.bytes_per_block); }},
      {"agentkv_segment_lookups_total", "counter", "Chat message segments looked up in the segment cache.",
       [](const EngineMetrics& m) { return double(m.segment_lookups); }},
      {"agentkv_segment_hit_tokens_total", "counter", "Tokens of message segments found with KV to reuse.",
       [](const EngineMetrics& m) { return double(m.segment_hit_tokens); }},
      {"agentkv_tokens_reused_approx_total", "counter",
       "Prompt tokens whose KV was reused approximately (another position or context), not recomputed.",
       [](const EngineMetrics& m) { return double(m.tokens_reused_approx); }},
      {"agentkv_tokens_recomputed_total", "counter", "Tokens selectively recomputed by chat sharing.",
       [](const EngineMetrics& m) { return double(m.tokens_recomputed); }},
      {"agentkv_segment_blends_total", "counter", "Runs of message segments blended from a master (chat sharing).",
       [](const EngineMetrics& m) { return double(m.segment_blends); }},
      {"agentkv_segment_collective_steps_total", "counter",
       "Collective steps those blends took: requests blending the same run in one engine step share one.",
       [](const EngineMetrics& m) { return double(m.segment_blend_steps); }},
      {"agentkv_grammar_tokens_total", "counter", "Tokens sampled under a grammar (structured outputs, tool calls).",
       [](const EngineMetrics& m) { return double(m.grammar_tokens); }},
      {"agentkv_grammar_seconds_total", "counter",
       "Time the grammar took for those tokens: masks, checks and advancing its state.",
       [](const EngineMetrics& m) { return m.grammar_seconds; }},
      {"agentkv_transfers_total", "counter",
       "Agents' contexts transferred into this model from another one (POST /v1/agents/{id}/transfer).",
       [](const EngineMetrics& m) { return double(m.transfers); }},
      {"agentkv_transferred_tokens_total", "counter",
       "Tokens of those contexts whose KV was projected from the sender's cache (the rest computed here).",
       [](const EngineMetrics& m) { return double(m.transferred_tokens); }},
      {"agentkv_segment_contexts", "gauge", "Contexts in the segment cache (masters of chat sharing).",
       [](const EngineMetrics& m) { return double(m.segment_contexts); }},
      {"agentkv_segment_blocks", "gauge", "Distinct KV blocks the segment cache's contexts reference.",
       [](const EngineMetrics& m) { return double(m.segment_blocks); }},
      {"agentkv_segment_compact_contexts", "gauge",
       "Of those contexts, the ones kept as master + diff (their blended runs' own blocks dropped).",
       [](const EngineMetrics& m) { return double(m.segment_compact); }},
      {"agentkv_segment_diff_blocks", "gauge", "Blocks the diff rows of those compact contexts take.",
       [](const EngineMetrics& m) { return double(m.segment_diff_blocks); }},
  };
  for (const Row& r : rows) {
    family(r.name, r.type, r.help);
    for (size_t i = 0; i < s.models.size(); ++i) sample(r.name, s.models[i].id, r.get(ms[i]));
  }
  // Lower KV tiers, labelled by tier: the same names for the disk and Redis (tier="redis_segments":
  // the index records of chat-sharing segment masters, kv/segment_index_record.h).
  struct TierRow {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const TierStats&);
    bool redis_knows;  // Redis expires records itself, so this process cannot know their bytes there
  };
  static const TierRow tier_rows[] = {
      {"agentkv_kv_tier_hits_total", "counter", "Prefix blocks restored from a lower KV tier instead of prefilled.",
       [](const TierStats& t) { return double(t.hits); }, true},
      {"agentkv_kv_tier_misses_total", "counter", "Lower-tier lookups with no usable record (absent, rejected or unreachable).",
       [](const TierStats& t) { return double(t.misses); }, true},
      {"agentkv_kv_tier_rejected_total", "counter",
       "Tier records that failed a check (corrupt, truncated, other model or format): deleted, never used.",
       [](const TierStats& t) { return double(t.rejected); }, true},
      {"agentkv_kv_tier_fallbacks_total", "counter",
       "Lower-tier lookups answered as misses because the tier could not be read (down, timed out): recomputed.",
       [](const TierStats& t) { return double(t.fallbacks); }, true},
      {"agentkv_kv_tier_writes_total", "counter", "Blocks evicted from RAM written to a lower KV tier.",
       [](const TierStats& t) { return double(t.writes); }, true},
      {"agentkv_kv_tier_write_drops_total", "counter", "Evicted blocks not written because the write queue was full.",
       [](const TierStats& t) { return double(t.write_drops); }, true},
      {"agentkv_kv_tier_write_errors_total", "counter",
       "Tier writes that failed, the tier being down included (nothing was left visible).",
       [](const TierStats& t) { return double(t.write_errors); }, true},
      {"agentkv_kv_tier_bytes", "gauge", "Bytes of this model's records in a lower KV tier.",
       [](const TierStats& t) { return double(t.bytes); }, false},
  };
  const bool disk_on = !s.opt.kv_disk.dir.empty(), redis_on = !s.opt.kv_redis.nodes.empty();
  for (const TierRow& r : tier_rows) {
    if (!disk_on && !(redis_on && r.redis_knows)) continue;
    family(r.name, r.type, r.help);
    for (size_t i = 0; i < s.models.size(); ++i) {
      if (disk_on) sample(r.name, s.models[i].id, r.get(ms[i].disk_tier), ",tier=\"disk\"");
      if (redis_on && r.redis_knows) {
        sample(r.name, s.models[i].id, r.get(ms[i].redis_tier), ",tier=\"redis\"");
        sample(r.name, s.models[i].id, r.get(ms[i].redis_segments), ",tier=\"redis_segments\"");
      }
    }
  }
  auto histogram = [&](const char* name, const char* help, const LatencyHistogram EngineMetrics::*field) {
    family(name, "histogram", help);
    for (size_t i = 0; i < s.models.size(); ++i) {
      const LatencyHistogram& h = ms[i].*field;
      uint64_t cum = 0;
      for (size_t b = 0; b < h.bounds().size(); ++b) {
        cum += h.counts()[b];
        char le[32];
        std::snprintf(le, sizeof le, "%g", h.bounds()[b]);
        sample(std::string(name) + "_bucket", s.models[i].id, double(cum), std::string(",le=\"") + le + "\"");
      }
      sample(std::string(name) + "_bucket", s.models[i].id, double(h.count()), ",le=\"+Inf\"");
      sample(std::string(name) + "_sum", s.models[i].id, h.sum());
      sample(std::string(name) + "_count", s.models[i].id, double(h.count()));
    }
  };
  family("agentkv_agents_resident", "gauge", "Agents alive (their contexts pinned).");
  for (size_t i = 0; i < s.models.size(); ++i) sample("agentkv_agents_resident", s.models[i].id, double(s.agents->count_on_model(i)));
  histogram("agentkv_time_to_first_token_seconds", "Time from arrival to the first token.", &EngineMetrics::ttft);
  histogram("agentkv_inter_token_latency_seconds", "Time between tokens of a sequence.", &EngineMetrics::inter_token);
  return out;
}

}  // namespace

void handle_metrics(const ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  if (req.method != "GET") return reply(w, ApiError{405, "use GET /metrics", ""});
  w.respond(200, "text/plain; version=0.0.4", metrics_text(s));
}

void handle_health(const HttpRequest& req, HttpResponseWriter& w) {
  if (req.method != "GET" && req.method != "HEAD") return reply(w, ApiError{405, "use GET /health", ""});
  w.respond(200, "application/json", "{\"status\":\"ok\"}");
}

}  // namespace agentkv
