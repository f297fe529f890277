// agentkv serve: the OpenAI-compatible HTTP server command; its flags become ServeOptions (server/server_state.h).
#include <algorithm>
#include <csignal>
#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "kv/kv_manager.h"
#include "engine/chat_sharing_gate.h"
#include "engine/sharing_gate.h"
#include "server/api_server.h"

namespace agentkv {

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

int cmd_serve(int argc, char** argv) {
  std::vector<std::string> models = {"smollm2"};
  std::string host = "127.0.0.1", api_key, kv_mem;
  int64_t port = 8080, threads = 0, max_tokens = 4096, max_body = 8 << 20;
  int64_t max_agents = int64_t(AgentLimits{}.max_agents);
  ArgParser p("serve", "OpenAI-compatible HTTP server (POST /v1/chat/completions, /v1/completions; GET /v1/models, /health, /metrics).");
  p.add_list("-m,--model", &models,
             "model alias or .gguf path; repeat it (-m A -m B) or give a comma list to serve several (the "
             "request's \"model\" picks)");
  p.add_string("--host", &host, "address to bind (127.0.0.1 unless told otherwise)");
  p.add_int("--port", &port, "port (0 = any free port, printed at start)", 0, 65535);
  p.add_string("--api-key", &api_key, "require Authorization: Bearer KEY on every endpoint but /health");
  p.add_string("--kv-mem", &kv_mem, "KV budget per model in bytes, e.g. 2G (default: a quarter of RAM split between models)");
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)", 0, 1024);
  p.add_int("--max-tokens", &max_tokens, "largest max_tokens a request may ask for", 1, 1 << 20);
  p.add_int("--max-body", &max_body, "largest request body in bytes", 1024, int64_t(1) << 30);
  p.add_int("--max-agents", &max_agents, "most agents held at once (creating one more answers 429)", 1, 1 << 24);
  bool strict_api = false;
  p.add_flag("--strict-api", &strict_api,
             "refuse request fields agentkv does not know (400 \"unknown field\") instead of ignoring them and "
             "logging each one's first use");
  std::string round_sharing = "on";
  double recompute = 0.15;
  p.add_string("--round-sharing", &round_sharing,
               "on | off: whether /v1/rounds shares the round's block collectively (TokenDance; a request turns "
               "it off with \"kv_sharing\": false); on runs a quality gate per model at start-up");
  std::string chat_sharing = "on";
  p.add_string("--chat-sharing", &chat_sharing,
               "on | off: whether /v1/chat/completions reuses the KV other requests computed for the same messages at "
               "any position (TokenDance's collective sharing; a request sets \"kv_sharing\" and \"recompute\"); on "
               "runs a quality gate of that path per model at start-up, and a model that fails serves chat exactly");
  p.add_float("--recompute", &recompute,
              "share of a shared block's tokens recomputed per agent (rounds and chat sharing)", 0.0, 1.0);
  std::string prm_calibration;
  p.add_string("--prm-calibration", &prm_calibration,
               "verify heads from agentkv fit-prm (comma-separated files), used by POST /v1/agents/{id}/score on the "
               "model each was fitted on; other models score zero-shot");
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (round_sharing != "on" && round_sharing != "off")
    return cli_fail("--round-sharing: '" + round_sharing + "' is not on or off");
  if (chat_sharing != "on" && chat_sharing != "off")
    return cli_fail("--chat-sharing: '" + chat_sharing + "' is not on or off");
  ServeOptions opt;
  opt.host = host;
  opt.port = int(port);
  opt.api_key = api_key;
  opt.threads = int(threads);
  opt.limits.max_tokens_limit = int(max_tokens);
  opt.max_body_bytes = size_t(max_body);
  opt.agent_limits.max_agents = size_t(max_agents);
  opt.limits.max_prompt_bytes = size_t(max_body);
  opt.limits.strict_api = strict_api;
  if (!kv_mem.empty()) {
    auto b = parse_byte_size(kv_mem);
    if (!b.ok()) return cli_fail("--kv-mem: " + b.error());
    opt.kv_mem = *b;
  }
  for (size_t at = 0; at < prm_calibration.size();) {
    const size_t comma = std::min(prm_calibration.find(',', at), prm_calibration.size());
    if (comma > at) opt.prm_calibrations.push_back(prm_calibration.substr(at, comma - at));
    at = comma + 1;
  }
  opt.round_sharing = round_sharing == "on";
  opt.recompute = recompute;
  opt.sharing_gate = [recompute](const LoadedModel& lm, ThreadPool& pool) -> Result<std::pair<bool, std::string>> {
    auto g = run_sharing_gate(lm, pool, recompute, kSharingGateThresholds, default_sharing_gate_cache_dir());
    if (!g.ok()) return g.status_error();
    std::fprintf(stderr, "agentkv: KV-sharing quality gate for %s: %s\n", lm.name.c_str(), g->summary().c_str());
    return std::make_pair(g->pass, g->summary());
  };
  opt.chat_sharing = chat_sharing == "on";
  opt.chat_sharing_gate = [recompute](const LoadedModel& lm, ThreadPool& pool) -> Result<std::pair<bool, std::string>> {
    auto g = run_chat_sharing_gate(lm, pool, recompute, kSharingGateThresholds, default_sharing_gate_cache_dir());
    if (!g.ok()) return g.status_error();
    std::fprintf(stderr, "agentkv: chat-sharing quality gate for %s: %s\n", lm.name.c_str(), g->summary().c_str());
    return std::make_pair(g->pass, g->summary());
  };
  auto server = ApiServer::create(models, opt);
  if (!server.ok()) return cli_fail(server.error());
  if (Status st = (*server)->start(); !st.ok()) return cli_fail(st.error());
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::string names;
  for (const std::string& m : models) names += (names.empty() ? "" : ",") + m;
  std::fprintf(stderr, "agentkv: serving %s on http://%s:%d\n", names.c_str(), host.c_str(), (*server)->port());
  std::fflush(stderr);
  while (!g_stop) {
    struct timespec ts{0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  std::fprintf(stderr, "agentkv: shutting down\n");
  (*server)->stop();
  return 0;
}

}  // namespace agentkv
