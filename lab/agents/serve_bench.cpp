#include "serve_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "http_client.h"
#include "percentile.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {

using Clock = std::chrono::steady_clock;


struct Sample {
  double ttft_s = 0;
  double e2e_s = 0;
  bool long_prompt = false;
  std::vector<double> itl_s;  // gaps between successive content chunks
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

bool is_long(const ServeBenchOptions& opt, int64_t index) {
  return opt.long_every > 0 && index % opt.long_every == opt.long_every - 1;
}

// About `tokens` tokens of plain prose (~0.75 words per token), numbered so that no two requests
// share more than the chat template's prefix.
std::string long_document(int64_t index, int tokens) {
  static const char* kWords[] = {"the",     "committee", "reviewed", "every",  "report", "about",   "water",
                                 "supply",  "in",        "northern", "valleys", "and",   "found",   "that",
                                 "storage", "levels",    "rose",     "after",  "careful", "repairs", "to",
                                 "old",     "pipes",     "near",     "three",  "villages"};
  std::string out = "Document " + std::to_string(index) + ":";
  const int n_words = std::max(1, tokens * 3 / 4);
  uint64_t h = uint64_t(index) * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n_words; ++i) {
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    out += ' ';
    out += kWords[(h >> 32) % (sizeof kWords / sizeof kWords[0])];
  }
  return out + "\n\nSummarise the document above in one sentence.";
}

std::string request_body(const ServeBenchOptions& opt, int64_t index) {
  const auto& prompts = serve_bench_prompts();
  const std::string content =
      is_long(opt, index) ? long_document(index, opt.long_prompt_tokens) : prompts[size_t(index) % prompts.size()];
  const Json message = {{"role", "user"}, {"content", content}};
  return dump_json({{"model", opt.model},
                    {"messages", Json::array({message})},
                    {"max_tokens", opt.max_tokens},
                    {"temperature", opt.temperature},
                    {"seed", index},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}}});
}

// One streamed request; an error message, or the sample.
Result<Sample> run_one(HttpClient& client, const ServeBenchOptions& opt, int64_t index) {
  HttpHeaders headers = {{"Content-Type", "application/json"}};
  if (!opt.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + opt.api_key);
  const std::string body = request_body(opt, index);
  Sample s;
  s.long_prompt = is_long(opt, index);
  bool first = true, done = false;
  double last_content = -1;
  std::string stream_error, error_body;
  SseSplitter sse;
  const Clock::time_point t0 = Clock::now();
  auto on_event = [&](std::string_view data) {
    if (first) {
      s.ttft_s = seconds_since(t0);
      first = false;
    }
    if (data == "[DONE]") {
      done = true;
      return;
    }
    auto j = parse_json(data);
    if (!j.ok()) {
      stream_error = "unparsable event: " + j.error();
      return;
    }
    if (const Json* err = json_member(*j, "error")) {
      const Json* m = json_member(*err, "message");
      stream_error = "error in stream: " + (m && m->is_string() ? m->get<std::string>() : dump_json(*err));
    }
    if (const Json* ch = json_member(*j, "choices"); ch && ch->is_array() && !ch->empty()) {
      const Json* delta = json_member((*ch)[0], "delta");
      const Json* text = delta ? json_member(*delta, "content") : nullptr;
      if (text && text->is_string() && !text->get<std::string>().empty()) {
        const double now = seconds_since(t0);
        if (last_content >= 0) s.itl_s.push_back(now - last_content);
        last_content = now;
      }
    }
    if (const Json* u = json_member(*j, "usage")) {
      if (const Json* c = json_member(*u, "completion_tokens"); c && c->is_number()) s.output_tokens = c->get<int64_t>();
      if (const Json* p = json_member(*u, "prompt_tokens"); p && p->is_number()) s.prompt_tokens = p->get<int64_t>();
    }
  };
  auto status = client.request("POST", opt.base_path + "/v1/chat/completions", headers, body, [&](std::string_view b) {
    // The status is known only afterwards: keep the start of the body for an error message.
    error_body.append(b.substr(0, 300 - std::min<size_t>(300, error_body.size())));
    sse.feed(b, on_event);
  });
  if (!status.ok()) return make_error(status.error());
  s.e2e_s = seconds_since(t0);
  if (*status != 200) return make_error("HTTP " + std::to_string(*status) + ": " + error_body);
  if (!stream_error.empty()) return make_error(stream_error);
  if (!done) return make_error("the stream ended without [DONE]");
  return s;
}

ServeLevelReport run_level(const ServeBenchOptions& opt, int n_clients) {
  ServeLevelReport rep;
  rep.clients = n_clients;
  std::mutex mu;
  std::vector<Sample> samples;
  std::atomic<int64_t> next{0};
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::milliseconds(int64_t(opt.duration_s * 1000));
  auto client_loop = [&] {
    HttpClient client(opt.host, opt.port, opt.timeout_s);
    for (;;) {
      if (opt.requests == 0 && Clock::now() >= deadline) return;
      const int64_t index = next.fetch_add(1);
      if (opt.requests > 0 && index >= opt.requests) return;
      auto r = run_one(client, opt, index);
      std::lock_guard<std::mutex> lock(mu);
      if (r.ok()) {
        samples.push_back(*r);
      } else {
        if (rep.errors++ == 0) rep.first_error = r.error();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n_clients; ++i) threads.emplace_back(client_loop);
  for (auto& t : threads) t.join();
  rep.wall_s = seconds_since(start);
  std::vector<double> ttft, e2e, itl;
  for (const Sample& s : samples) {
    ttft.push_back(s.ttft_s);
    e2e.push_back(s.e2e_s);
    itl.insert(itl.end(), s.itl_s.begin(), s.itl_s.end());
    rep.long_requests += s.long_prompt ? 1 : 0;
    rep.prompt_tokens += s.prompt_tokens;
    rep.output_tokens += s.output_tokens;
  }
  rep.requests = int64_t(samples.size());
  rep.requests_per_s = rep.wall_s > 0 ? double(rep.requests) / rep.wall_s : 0;
  rep.output_tokens_per_s = rep.wall_s > 0 ? double(rep.output_tokens) / rep.wall_s : 0;
  rep.ttft_p50_s = percentile(ttft, 0.50);
  rep.ttft_p99_s = percentile(ttft, 0.99);
  rep.e2e_p50_s = percentile(e2e, 0.50);
  rep.e2e_p99_s = percentile(e2e, 0.99);
  rep.itl_p50_s = percentile(itl, 0.50);
  rep.itl_p99_s = percentile(itl, 0.99);
  rep.itl_max_s = itl.empty() ? 0 : *std::max_element(itl.begin(), itl.end());
  return rep;
}

}  // namespace

const std::vector<std::string>& serve_bench_prompts() {
  static const std::vector<std::string> prompts = {
      "What is the capital of France?",
      "Name three colours of the rainbow.",
      "Explain in one sentence why the sky is blue.",
      "Write a haiku about autumn leaves.",
      "You are a helpful travel agent. A customer wants a quiet weekend by the sea in early spring, with "
      "good walks, a small hotel and fresh fish for dinner. Suggest a plan for the two days.",
      "Summarise the following note for a busy manager: the build server ran out of disk twice this week "
      "because old artifacts were never deleted; we added a nightly job that keeps the last ten builds, "
      "and disk use is now stable at forty percent.",
      "List the planets of the solar system in order from the sun.",
      "What does a compiler do, in two sentences?",
  };
  return prompts;
}

ServeBenchReport run_serve_bench(const ServeBenchOptions& opt) {
  ServeBenchReport rep;
  rep.target = opt.host + ":" + std::to_string(opt.port);
  rep.model = opt.model;
  rep.max_tokens = opt.max_tokens;
  rep.long_every = opt.long_every;
  rep.long_prompt_tokens = opt.long_prompt_tokens;
  for (int c : opt.clients) rep.levels.push_back(run_level(opt, c));
  return rep;
}

std::string serve_bench_table(const ServeBenchReport& rep) {
  std::string out = "bench-serve " + rep.target + " model " + rep.model + ", max_tokens " +
                    std::to_string(rep.max_tokens) + ", streamed chat completions, closed loop" +
                    (rep.long_every > 0 ? ", every " + std::to_string(rep.long_every) + "th request a ~" +
                                              std::to_string(rep.long_prompt_tokens) + "-token document"
                                        : std::string()) +
                    "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%7s %9s %6s %8s %10s %10s %10s %9s %9s %10s %10s %7s\n", "clients", "requests",
                "errors", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "e2e p50", "e2e p99",
                "wall s");
  out += line;
  for (const ServeLevelReport& l : rep.levels) {
    std::snprintf(line, sizeof line, "%7d %9lld %6lld %8.2f %10.1f %9.0fms %9.0fms %7.1fms %7.1fms %9.0fms %9.0fms %7.1f\n",
                  l.clients, (long long)l.requests, (long long)l.errors, l.requests_per_s, l.output_tokens_per_s,
                  l.ttft_p50_s * 1e3, l.ttft_p99_s * 1e3, l.itl_p50_s * 1e3, l.itl_p99_s * 1e3, l.e2e_p50_s * 1e3,
                  l.e2e_p99_s * 1e3, l.wall_s);
    out += line;
    if (!l.first_error.empty()) out += "        first error: " + l.first_error + "\n";
  }
  return out;
}

void to_json(Json& j, const ServeLevelReport& l) {
  j = {{"clients", l.clients},
       {"requests", l.requests},
       {"errors", l.errors},
       {"prompt_tokens", l.prompt_tokens},
       {"output_tokens", l.output_tokens},
       {"wall_seconds", l.wall_s},
       {"requests_per_second", l.requests_per_s},
       {"output_tokens_per_second", l.output_tokens_per_s},
       {"ttft_p50_seconds", l.ttft_p50_s},
       {"ttft_p99_seconds", l.ttft_p99_s},
       {"e2e_p50_seconds", l.e2e_p50_s},
       {"e2e_p99_seconds", l.e2e_p99_s},
       {"itl_p50_seconds", l.itl_p50_s},
       {"itl_p99_seconds", l.itl_p99_s},
       {"itl_max_seconds", l.itl_max_s},
       {"long_requests", l.long_requests}};
  if (!l.first_error.empty()) j["first_error"] = l.first_error;
}

void to_json(Json& j, const ServeBenchReport& rep) {
  j = {{"target", rep.target},
       {"model", rep.model},
       {"max_tokens", rep.max_tokens},
       {"long_every", rep.long_every},
       {"long_prompt_tokens", rep.long_prompt_tokens},
       {"levels", rep.levels}};
}

}  // namespace agentkv
