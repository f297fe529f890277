// agentkv serve: the OpenAI-compatible HTTP server command; its flags become ServeOptions (server/server_state.h)
// and the transport's HttpServerOptions (connection caps, timeouts, drain). Careless settings that would
// open the server are refused: an empty --host or API key (an unset shell variable) is an error, not
// "every interface" or "no auth".
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "kv/kv_diff_codec.h"
#include "kv/kv_manager.h"
#include "engine/chat_sharing_gate.h"
#include "engine/compact_context.h"
#include "engine/sharing_gate.h"
#include "server/api_server.h"
#include "util/input_file.h"
#include "util/machine.h"

namespace agentkv {

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// A string no argv element can hold (C strings end at NUL): tells "--api-key not given" from --api-key "".
const std::string kNotGiven(1, '\0');

// The key in an --api-key-file: a regular file of at most 4 KiB, trailing whitespace dropped.
Result<std::string> read_key_file(const std::string& path) {
  std::string key;
  AGENTKV_ASSIGN_OR_RETURN(key, read_input_file(path, 4096, "--api-key-file"));
  while (!key.empty() && std::strchr(" \t\r\n", key.back()) != nullptr) key.pop_back();
  return key;
}

// Whether a --host value only listens on this machine (127.0.0.0/8, ::1, localhost).
bool loopback_host(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return host == "localhost";
}

// The API key from --api-key, --api-key-file or $AGENTKV_API_KEY (in that order; the flags together are
// ambiguous). Empty: no key. A source that is given but empty is an error.
Result<std::string> api_key_from(const std::string& flag, const std::string& file) {
  if (flag != kNotGiven && !file.empty()) return make_error("give the API key once: --api-key or --api-key-file");
  std::string key, from;
  if (flag != kNotGiven) {
    key = flag, from = "--api-key";
  } else if (!file.empty()) {
    AGENTKV_ASSIGN_OR_RETURN(key, read_key_file(file));
    from = "--api-key-file " + file;
  } else if (const char* env = std::getenv("AGENTKV_API_KEY")) {
    key = env, from = "AGENTKV_API_KEY";
  } else {
    return std::string();
  }
  if (key.empty()) return make_error(from + " is empty: that would serve without authentication; give a key, or leave it out");
  return key;
}
}  // namespace

int cmd_serve(int argc, char** argv) {
  std::vector<std::string> models = {"smollm2"};
  std::string host = "127.0.0.1", api_key, api_key_file;
  int64_t kv_mem = 0;
  int64_t port = 8080, threads = 0, max_tokens = 4096, max_body = 8 << 20;
  int64_t max_agents = int64_t(AgentLimits{}.max_agents);
  int64_t max_batch_tokens = ServeOptions{}.max_batch_tokens;
  ArgParser p("serve", "OpenAI-compatible HTTP server (POST /v1/chat/completions, /v1/completions; GET /v1/models, /health, /metrics).");
  p.add_list("-m,--model", &models,
             "model alias or .gguf path; repeat it (-m A -m B) or give a comma list to serve several (the "
             "request's \"model\" picks)");
  p.add_string("--host", &host, "address to bind (127.0.0.1 unless told otherwise)");
  p.add_int("--port", &port, "port (0 = any free port, printed at start)", 0, 65535);
  p.add_string("--api-key", &api_key,
               "require Authorization: Bearer KEY on every endpoint but /health (visible in ps: prefer "
               "--api-key-file or $AGENTKV_API_KEY); an empty key is refused");
  api_key = kNotGiven;  // after add_string, so --help shows no default
  p.add_string("--api-key-file", &api_key_file, "read the API key from this file (trailing whitespace dropped)");
  HttpServerOptions transport;
  int64_t max_connections = transport.max_connections, per_client = transport.max_connections_per_client;
  p.add_int("--max-connections", &max_connections,
            "most open connections; at the cap the longest-idle keep-alive (then the slowest unfinished "
            "request) is closed for a newcomer, else it gets 503", 1, 1 << 20);
  p.add_int("--max-connections-per-client", &per_client,
            "most open connections from one client address (429 beyond); behind a proxy, whose "
            "address all clients share, raise it to --max-connections", 1, 1 << 20);
  p.add_float("--header-timeout", &transport.header_timeout_s,
              "seconds a request's line and headers may take, from the connect or (on a kept-alive connection) their "
              "first byte; then 408", 0.1, 3600);
  p.add_float("--body-min-rate", &transport.body_min_rate,
              "bytes/s a request body must average once " + std::to_string(int(transport.body_grace_s)) +
                  " s have passed since its head (then 408); 0: no minimum",
              0, 1e12);
  p.add_float("--idle-timeout", &transport.idle_timeout_s,
              "seconds a keep-alive connection waits for its next request, and a request may go without a byte", 0.1,
              86400);
  p.add_float("--drain-timeout", &transport.drain_timeout_s,
              "on SIGTERM/SIGINT, seconds running requests may take to finish (new ones get 503) before they are cut",
              0, 86400);
  p.add_kv_mem(&kv_mem, "KV budget per model in bytes, e.g. 2G (default: a quarter of RAM split between models)");
  std::string kv_disk;
  int64_t kv_disk_max = 0;
  p.add_string("--kv-disk", &kv_disk,
               "directory of the KV disk tier: prefix blocks evicted from RAM are written there (in the background) "
               "and restored instead of prefilled when a prompt needs them again; one checksummed file per block, "
               "named by model fingerprint and block hash (default: off)");
  p.add_byte_size("--kv-disk-max", &kv_disk_max,
                  "most bytes each model's blocks may take in --kv-disk, e.g. 20G; the oldest written go first "
                  "(default: no limit)");
  std::string kv_redis;
  const RedisTierOptions redis_defaults;
  int64_t kv_redis_ttl = redis_defaults.ttl_s, kv_redis_timeout_ms = redis_defaults.timeout_ms;
  p.add_string("--kv-redis", &kv_redis,
               "Redis nodes of the KV tier below the disk, host:port[,host:port...]: every exact full prefix block "
               "is written there as soon as it is computed (in the background, set-if-absent) and restored "
               "instead of prefilled, by this server after eviction and by every other agentkv server pointed "
               "at the same nodes; keys are sharded over the nodes by block hash (default: off)");
  p.add_int("--kv-redis-ttl", &kv_redis_ttl, "seconds a block's record lives in Redis (with --kv-redis)", 1,
            int64_t(1) << 30);
  p.add_int("--kv-redis-timeout-ms", &kv_redis_timeout_ms,
            "most milliseconds a Redis lookup may wait before the block is recomputed instead (with --kv-redis); "
            "a node that fails is retried with backoff",
            1, 60000);
  p.add_threads(&threads);
  p.add_int("--max-tokens", &max_tokens, "largest max_tokens a request may ask for", 1, 1 << 20);
  p.add_int("--max-body", &max_body, "largest request body in bytes", 1024, int64_t(1) << 30);
  p.add_int("--max-batch-tokens", &max_batch_tokens,
            "tokens per engine step: decode tokens first, prefills chunked into the rest, so a long prompt "
            "does not stall streams that are decoding (larger: faster long prefills, longer stalls)",
            1, 1 << 20);
  p.add_int("--max-agents", &max_agents, "most agents held at once (creating one more answers 429)", 1, 1 << 24);
  bool strict_api = false;
  p.add_flag("--strict-api", &strict_api,
             "refuse request fields agentkv does not know (400 \"unknown field\") instead of ignoring them and "
             "logging each one's first use");
  std::string round_sharing = "on";
  double recompute = 0.15;
  // Chat's own default: on the chat path reuse after another system prompt costs little, and the chat
  // gate measures the same quality at R = 0.05 as at 0.15 on both models (BENCHMARKS.md, "Chat sharing"),
  // for a quarter less prefill in a group chat.
  double chat_recompute = 0.05;
  p.add_string("--round-sharing", &round_sharing,
               "on | off: whether /v1/rounds shares the round's block collectively (TokenDance; a request turns "
               "it off with \"kv_sharing\": false); on runs a quality gate per model at start-up");
  std::string chat_sharing = "on";
  p.add_string("--chat-sharing", &chat_sharing,
               "on | off: whether /v1/chat/completions reuses the KV other requests computed for the same messages at "
               "any position (TokenDance's collective sharing; a request sets \"kv_sharing\" and \"recompute\"); on "
               "runs a quality gate of that path per model at start-up, and a model that fails serves chat exactly");
  std::string chat_compact = "on";
  p.add_string("--chat-compact", &chat_compact,
               "on | off: whether chat sharing stores a context's blended messages as master + diff (the master's "
               "blocks and only the rows that differ, rebuilt bit for bit when a request reuses them) instead of a "
               "dense copy; it changes the KV held, never a reply");
  std::string diff_format = "f16";
  p.add_string("--diff-format", &diff_format,
               "f16 | int8 | int4: how master + diff storage (rounds and chat) keeps the rows that differ from the "
               "master: f16 bit for bit; int8 / int4 their difference from the master within a stated bound, in "
               "about a half / a quarter of the bytes (BENCHMARKS.md, \"Smaller diffs\"); the quality gates measure "
               "the format given");
  std::string resume_in_attention = "off";
  p.add_string("--resume-in-attention", &resume_in_attention,
               "on | off: whether an agent's turn reads its master + diff context inside attention (the masters' "
               "blocks in place, its diff rows over them) instead of restoring a dense copy first: less KV while "
               "agents run, so more of them fit (BENCHMARKS.md, \"Restore inside attention in the scheduler\"); the "
               "rounds' quality gate measures the path chosen");
  p.add_float("--recompute", &recompute,
              "share of a round's shared block recomputed per agent (/v1/rounds; a request's \"recompute\" overrides it)",
              0.0, 1.0);
  p.add_float("--chat-recompute", &chat_recompute,
              "share of a chat request's reused message tokens recomputed (a request's \"recompute\" overrides it; "
              "the chat quality gate runs at this share)",
              0.0, 1.0);
  std::string echo_keep = "off";
  p.add_string("--echo-keep", &echo_keep,
               "off | SHARE (0-1): in /v1/rounds, an agent's own last answer that a later round's block quotes is "
               "stored once, as the block master's rows plus SHARE of its rows (those deviating most), by whole KV "
               "blocks: less KV per agent, approximately (BENCHMARKS.md, \"Echoes\"); the rounds' quality gate "
               "measures it");
  std::string master_context = "block";
  p.add_string("--master-context", &master_context,
               "block | agent: where /v1/rounds computes a round's shared block's master: on its own ([BOS][block]) "
               "or in a sharing agent's own context up to the block's end (the one the prefix cache holds most of), "
               "prefilled exactly once a round: the other agents' rows then deviate less from their exact ones "
               "(BENCHMARKS.md, \"The master computed in an agent's context\"); a round whose first wave it would "
               "crowd uses [BOS][block] (its kv_sharing names the master_context); the rounds' quality gate measures "
               "it. block by default: that master is the same KV on every server, restored from --kv-redis by the "
               "next");
  std::string prm_calibration;
  p.add_string("--prm-calibration", &prm_calibration,
               "verify heads from agentkv fit-prm (comma-separated files), used by POST /v1/agents/{id}/score on the "
               "model each was fitted on; other models score zero-shot");
  std::vector<std::string> prm_adapters;
  p.add_list("--prm-adapter", &prm_adapters,
             "KV-PRM verifiers with trained LoRA adapters from agentkv fit-prm --lora (repeat or comma-separate), "
             "used by POST /v1/agents/{id}/score on the model each was fitted on; a damaged file, or one for a model "
             "not served, stops the start");
  std::vector<std::string> transfer_maps;
  p.add_list("--transfer-map", &transfer_maps,
             "KV-transfer maps from agentkv fit-transfer (repeat or comma-separate), each between two served models: "
             "POST /v1/agents/{id}/transfer hands an agent's context to the map's receiver; a damaged map, or one "
             "for a model not served, stops the start");
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (host.empty()) return cli_fail("--host is empty; give an address (0.0.0.0 or :: listens on every interface)");
  auto key = api_key_from(api_key, api_key_file);
  if (!key.ok()) return cli_fail(key.error());
  transport.max_connections = int(max_connections);
  transport.max_connections_per_client = int(per_client);
  if (round_sharing != "on" && round_sharing != "off")
    return cli_fail("--round-sharing: '" + round_sharing + "' is not on or off");
  if (chat_sharing != "on" && chat_sharing != "off")
    return cli_fail("--chat-sharing: '" + chat_sharing + "' is not on or off");
  if (resume_in_attention != "on" && resume_in_attention != "off")
    return cli_fail("--resume-in-attention: '" + resume_in_attention + "' is not on or off");
  if (chat_compact != "on" && chat_compact != "off")
    return cli_fail("--chat-compact: '" + chat_compact + "' is not on or off");
  auto format = parse_diff_format(diff_format);
  if (!format.ok()) return cli_fail("--diff-format: " + format.error());
  auto parsed_echo = parse_echo_keep(echo_keep);
  if (!parsed_echo.ok()) return cli_fail("--echo-keep: " + parsed_echo.error());
  const std::optional<double> echo = *parsed_echo;
  auto parsed_master = parse_master_context(master_context);
  if (!parsed_master.ok()) return cli_fail("--master-context: " + parsed_master.error());
  const MasterContext master = *parsed_master;
  ServeOptions opt;
  opt.host = host;
  opt.port = int(port);
  opt.api_key = *key;
  opt.threads = int(threads);
  opt.max_batch_tokens = int(max_batch_tokens);
  opt.limits.max_tokens_limit = int(max_tokens);
  opt.max_body_bytes = size_t(max_body);
  opt.agent_limits.max_agents = size_t(max_agents);
  opt.limits.max_prompt_bytes = size_t(max_body);
  opt.limits.strict_api = strict_api;
  opt.kv_mem = kv_mem;
  if (kv_disk_max > 0 && kv_disk.empty()) return cli_fail("--kv-disk-max needs --kv-disk DIR");
  opt.kv_disk.dir = kv_disk;
  opt.kv_disk.max_bytes = kv_disk_max;
  if (!kv_redis.empty()) {
    auto nodes = parse_redis_nodes(kv_redis);
    if (!nodes.ok()) return cli_fail("--kv-redis: " + nodes.error());
    opt.kv_redis.nodes = std::move(nodes).value();
  }
  opt.kv_redis.ttl_s = int(kv_redis_ttl);
  opt.kv_redis.timeout_ms = int(kv_redis_timeout_ms);
  // --kv-mem is per model: the models' budgets together must fit the machine too.
  if (kv_mem > 0 && models.size() > 1 && kv_mem <= std::numeric_limits<int64_t>::max() / int64_t(models.size()))
    if (Status st = check_memory_budget("--kv-mem x " + std::to_string(models.size()) + " models",
                                        kv_mem * int64_t(models.size()));
        !st.ok())
      return cli_fail(st.error());
  for (size_t at = 0; at < prm_calibration.size();) {
    const size_t comma = std::min(prm_calibration.find(',', at), prm_calibration.size());
    if (comma > at) opt.prm_calibrations.push_back(prm_calibration.substr(at, comma - at));
    at = comma + 1;
  }
  opt.prm_adapters = prm_adapters;
  opt.transfer_maps = transfer_maps;
  opt.round_sharing = round_sharing == "on";
  opt.recompute = recompute;
  const DiffFormat diffs = *format;
  opt.resume_in_attention = resume_in_attention == "on";
  const bool in_attention = opt.resume_in_attention;
  opt.echo_keep = echo;
  opt.master_context = master;
  const GatePath gate_path{.format = diffs, .in_attention = in_attention, .echo_keep = echo, .master_context = master};
  opt.sharing_gate = [recompute, gate_path](const LoadedModel& lm,
                                            ThreadPool& pool) -> Result<std::pair<bool, std::string>> {
    auto g = run_sharing_gate(lm, pool, recompute, kSharingGateThresholds, default_sharing_gate_cache_dir(), gate_path);
    if (!g.ok()) return g.status_error();
    std::fprintf(stderr, "agentkv: KV-sharing quality gate for %s: %s\n", lm.name.c_str(), g->summary().c_str());
    return std::make_pair(g->pass, g->summary());
  };
  opt.chat_sharing = chat_sharing == "on";
  opt.chat_compact = chat_compact == "on";
  opt.diff_format = *format;
  opt.chat_recompute = chat_recompute;
  opt.chat_sharing_gate = [chat_recompute, diffs](const LoadedModel& lm,
                                                  ThreadPool& pool) -> Result<std::pair<bool, std::string>> {
    auto g = run_chat_sharing_gate(lm, pool, chat_recompute, kSharingGateThresholds, default_sharing_gate_cache_dir(),
                                   diffs);
    if (!g.ok()) return g.status_error();
    std::fprintf(stderr, "agentkv: chat-sharing quality gate for %s: %s\n", lm.name.c_str(), g->summary().c_str());
    return std::make_pair(g->pass, g->summary());
  };
  auto server = ApiServer::create(models, opt, transport);
  if (!server.ok()) return cli_fail(server.error());
  if (Status st = (*server)->start(); !st.ok()) return cli_fail(st.error());
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  if (opt.api_key.empty() && !loopback_host(host))
    std::fprintf(stderr,
                 "agentkv: WARNING: listening on %s, beyond this machine, WITHOUT an API key: anyone who can reach "
                 "the port can use it (set --api-key-file or $AGENTKV_API_KEY)\n",
                 host.c_str());
  std::string names;
  for (const std::string& m : models) names += (names.empty() ? "" : ",") + m;
  std::fprintf(stderr, "agentkv: serving %s on http://%s:%d\n", names.c_str(), host.c_str(), (*server)->port());
  std::fflush(stderr);
  while (!g_stop) {
    struct timespec ts{0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  std::fprintf(stderr, "agentkv: shutting down (running requests may take up to %g s)\n", transport.drain_timeout_s);
  std::fflush(stderr);
  (*server)->stop();
  return 0;
}

}  // namespace agentkv
