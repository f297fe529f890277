#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/agents/http_client.h"
#include "kv/kv_manager.h"
#include "lab/agents/serve_bench.h"
#include "server/api_server.h"

namespace agentkv {

int cmd_bench_serve(int argc, char** argv) {
  std::string model = "smollm2", url, api_key, clients = "1,8,64";
  int64_t kv_mem = int64_t(1) << 30;
  int64_t requests = 0, max_tokens = 32, threads = 0, long_every = 0, long_tokens = 2000, batch_tokens = 512;
  double duration = 30, temperature = 0;
  bool json = false;
  ArgParser p("bench-serve",
              "Closed-loop streaming chat clients against agentkv serve (started in process, or --url) at each "
              "concurrency level: requests/s, output tokens/s, TTFT, inter-token and end-to-end latency p50/p99.");
  p.add_string("-m,--model", &model, "model alias or .gguf path (the request's \"model\")");
  p.add_string("--url", &url, "benchmark a running server at http://HOST:PORT instead of starting one");
  p.add_string("--api-key", &api_key, "API key to send (with --url)");
  p.add_string("--clients", &clients, "concurrency levels, a comma list run one after another");
  p.add_float("--duration", &duration, "seconds per level (when --requests is 0)", 0.1, 86400);
  p.add_int("--requests", &requests, "requests per level (0: run for --duration)", 0, int64_t(1) << 40);
  p.add_int("--max-tokens", &max_tokens, "max_tokens of every request", 1, 1 << 20);
  p.add_float("--temperature", &temperature, "sampling temperature (0: greedy)", 0, 2);
  p.add_int("--long-every", &long_every,
            "mixed load: every Nth request asks about a long document, prefilled beside the decoding streams "
            "(0: none)", 0, 1 << 20);
  p.add_int("--long-prompt-tokens", &long_tokens, "about how many tokens each long document has", 16, 1 << 20);
  p.add_int("--max-batch-tokens", &batch_tokens,
            "the in-process server's tokens per engine step (long prefills are chunked to fit beside decode)", 1,
            1 << 20);
  p.add_kv_mem(&kv_mem, "KV budget of the in-process server");
  p.add_threads(&threads, "engine threads of the in-process server (0 = all cores)");
  p.add_flag("--json", &json, "print the report as JSON instead of a table");
  if (auto rc = p.parse_command(argc, argv)) return *rc;

  ServeBenchOptions opt;
  opt.model = model;
  opt.api_key = api_key;
  opt.duration_s = duration;
  opt.requests = requests;
  opt.max_tokens = int(max_tokens);
  opt.temperature = temperature;
  opt.long_every = int(long_every);
  opt.long_prompt_tokens = int(long_tokens);
  opt.clients.clear();
  for (const std::string& c : split_commas(clients)) {
    char* end = nullptr;
    const long n = std::strtol(c.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 4096) return cli_fail("--clients: '" + c + "' is not a count in [1, 4096]");
    opt.clients.push_back(int(n));
  }
  if (opt.clients.empty()) return cli_fail("--clients: no concurrency level given");

  std::unique_ptr<ApiServer> server;
  if (!url.empty()) {
    auto u = parse_http_url(url);
    if (!u.ok()) return cli_fail("--url: " + u.error());
    opt.host = u->host;
    opt.port = u->port;
    opt.base_path = u->base_path;
  } else {
    ServeOptions so;
    so.port = 0;
    so.threads = int(threads);
    so.kv_mem = kv_mem;
    so.max_batch_tokens = int(batch_tokens);
    auto s = ApiServer::create({model}, so);
    if (!s.ok()) return cli_fail(s.error());
    server = std::move(*s);
    if (Status st = server->start(); !st.ok()) return cli_fail(st.error());
    opt.port = server->port();
  }
  const ServeBenchReport rep = run_serve_bench(opt);
  if (server) server->stop();
  std::fputs(json ? (dump_json(rep) + "\n").c_str() : serve_bench_table(rep).c_str(), stdout);
  for (const ServeLevelReport& l : rep.levels)
    if (l.errors > 0) return cli_fail(std::to_string(l.errors) + " requests failed at " + std::to_string(l.clients) +
                                      " clients; first: " + l.first_error);
  return 0;
}

}  // namespace agentkv
