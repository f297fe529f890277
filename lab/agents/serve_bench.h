// bench-serve: closed-loop HTTP clients against an OpenAI-compatible server (agentkv serve, in process
// or at a URL). At each concurrency level, every client sends a streamed chat completion, waits for its
// last event and sends the next, for a duration or a request count; the report gives requests/s,
// output tokens/s, time to first token, inter-token latency and end-to-end latency percentiles per
// level. A mixed load (long_every) adds long-document requests, to see decode streams' inter-token
// latency while prefills run beside them (the engine chunks prefills: serve --max-batch-tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/json.h"

namespace agentkv {

struct ServeBenchOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string base_path;           // prefix of /v1/... (from a URL with a path)
  std::string model = "smollm2";
  std::string api_key;             // sent as Authorization: Bearer KEY when set
  std::vector<int> clients{1, 8, 64};
  double duration_s = 30;          // per level, when requests == 0
  int64_t requests = 0;            // per level; 0: run for duration_s
  int max_tokens = 32;
  double temperature = 0;          // 0: greedy (request i still gets seed i)
  double timeout_s = 600;          // one request's longest silence
  // Mixed load: every long_every-th request (0: none) asks about a document of about
  // long_prompt_tokens tokens, unique per request, so its prefill runs while other streams decode.
  int long_every = 0;
  int long_prompt_tokens = 2000;
};

struct ServeLevelReport {
  int clients = 0;
  int64_t requests = 0;            // completed: 200 and a stream ending in [DONE]
  int64_t errors = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;       // usage.completion_tokens summed
  double wall_s = 0;               // level start to the last request's end
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;  // request sent to its first streamed chunk
  double e2e_p50_s = 0, e2e_p99_s = 0;    // request sent to [DONE]
  // Inter-token latency: the gap between successive content chunks of one stream, over every stream.
  double itl_p50_s = 0, itl_p99_s = 0, itl_max_s = 0;
  int64_t long_requests = 0;              // of `requests`, the long-document ones
  std::string first_error;
};

struct ServeBenchReport {
  std::string target;              // host:port
  std::string model;
  int max_tokens = 0;
  int long_every = 0, long_prompt_tokens = 0;
  std::vector<ServeLevelReport> levels;
};

// The fixed prompt mix: request i asks prompt i % size (short questions to a paragraph).
const std::vector<std::string>& serve_bench_prompts();

// Runs every level in order. Failed requests are counted in the level, not fatal.
ServeBenchReport run_serve_bench(const ServeBenchOptions& opt);

std::string serve_bench_table(const ServeBenchReport& rep);
// The report as JSON (the --json output; key names are the report's public format).
void to_json(Json& j, const ServeLevelReport& l);
void to_json(Json& j, const ServeBenchReport& rep);

}  // namespace agentkv
