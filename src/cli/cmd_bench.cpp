#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/single_sequence.h"
#include "model/loaded_model.h"
#include "ops/cpu_features.h"
#include "util/json.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {
// Through the serving engine (block manager, scheduler, sampler): prefill = time to the first token
// of an n_prompt request, decode = the time between the first and the last of n_gen tokens of
// `parallel` 1-token requests decoded together (one batched step per token of all of them).
Status engine_times(const LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& prompt, int64_t n_gen,
                    int64_t parallel, double* pp, double* tg) {
  EngineOptions eo;
  eo.kv.mem_bytes = KvArena::bytes_per_block(lm.config(), eo.kv.block_size) *
                    ((int64_t(prompt.size()) + n_gen) / eo.kv.block_size + 8) * parallel;
  eo.kv.prefix_caching = false;  // repetitions must not hit the previous one's blocks
  eo.scheduler.max_batch_tokens = int(std::max<int64_t>(int64_t(prompt.size()), parallel));
  eo.scheduler.max_running = int(std::max<int64_t>(eo.scheduler.max_running, parallel));
  std::unique_ptr<Engine> engine;
  AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(lm, eo, pool));
  // *first: when the last request got its first token (all are decoding from then on).
  auto run = [&](std::vector<int32_t> p, int64_t max_tokens, int64_t n_requests, double* first,
                 double* last) -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    *first = -1;
    std::vector<char> started(size_t(n_requests), 0);
    int64_t n_started = 0;
    for (int64_t i = 0; i < n_requests; ++i) {
      RequestParams rp;
      rp.prompt = p;
      rp.prompt[0] = int32_t((p[0] + i) % lm.config().n_vocab);  // no prefix hits between them
      rp.max_tokens = int(max_tokens);
      rp.ignore_eos = true;
      auto id = engine->add_request(std::move(rp), [&, i](const RequestEvent& ev) {
        if (!ev.has_token) return;
        const double t = seconds_since(t0);
        if (!started[size_t(i)]) {
          started[size_t(i)] = 1;
          if (++n_started == n_requests) *first = t;
        }
        *last = t;
      });
      if (!id.ok()) return id.status_error();
    }
    return engine->run_until_idle();
  };
  double first = 0, last = 0;
  AGENTKV_TRY(run(prompt, 1, 1, &first, &last));
  *pp = first;
  AGENTKV_TRY(run({prompt[0]}, n_gen + 1, parallel, &first, &last));
  *tg = last - first;  // n_gen decode steps after the first token
  return {};
}

}  // namespace

// Mirrors llama-bench's pp/tg tests: prefill of n_prompt tokens into an empty context in one batch,
// and n_gen single-token decode steps from an empty context; mean over repetitions after a warm-up.
int cmd_bench(int argc, char** argv) {
  std::string model = "smollm2";
  int64_t n_prompt = 512, n_gen = 128, threads = 0, reps = 3;
  ArgParser p("bench", "Prints one JSON object with prefill_tok_s and decode_tok_s.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_int("-p,--n-prompt", &n_prompt, "prefill tokens", 1, 1 << 16);
  p.add_int("-n,--n-gen", &n_gen, "decode tokens", 1, 1 << 16);
  p.add_threads(&threads);
  p.add_int("-r,--reps", &reps, "repetitions", 1, 1000);
  bool use_engine = false;
  int64_t parallel = 1;
  p.add_flag("--engine", &use_engine, "run through the serving engine (paged KV manager, scheduler, sampler)");
  p.add_int("--parallel", &parallel,
            "with --engine: sequences decoded together, one batched step per token; decode_tok_s counts all "
            "of them",
            1, 4096);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (parallel > 1 && !use_engine) return cli_fail("--parallel needs --engine (the single-sequence path runs one)");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const Model& m = *(*lm)->model;
  ThreadPool pool{int(threads)};
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, std::min((*lm)->tokenizer->n_vocab(), m.config().n_vocab) - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (auto& t : prompt) t = pick(rng);
  std::vector<float> logits;
  SingleSequence pseq(m, int(n_prompt), int(n_prompt));
  SingleSequence gseq(m, int(n_gen), int(n_gen));
  double pp_total = 0, tg_total = 0;
  for (int r = -1; r < reps; ++r) {  // r = -1 is the warm-up
    if (use_engine) {
      double pp = 0, tg = 0;
      if (Status st = engine_times(**lm, pool, prompt, n_gen, parallel, &pp, &tg); !st.ok()) return cli_fail(st.error());
      if (r >= 0) {
        pp_total += pp;
        tg_total += tg;
      }
      continue;
    }
    pseq.reset();
    auto t0 = std::chrono::steady_clock::now();
    if (Status st = pseq.eval(prompt, prompt.size() - 1, logits, pool); !st.ok()) return cli_fail(st.error());
    const double pp = seconds_since(t0);
    gseq.reset();
    t0 = std::chrono::steady_clock::now();
    int32_t tok = prompt[0];
    for (int64_t i = 0; i < n_gen; ++i) {
      const int32_t one[1] = {tok};
      if (Status st = gseq.eval(one, 0, logits, pool); !st.ok()) return cli_fail(st.error());
      tok = pick(rng);
    }
    const double tg = seconds_since(t0);
    if (r >= 0) {
      pp_total += pp;
      tg_total += tg;
    }
  }
  const Json out = {{"model", (*lm)->name},
                    {"threads", pool.size()},
                    {"isa", active_isa_name()},
                    {"path", use_engine ? "engine" : "single-sequence"},
                    {"n_prompt", n_prompt},
                    {"n_gen", n_gen},
                    {"parallel", parallel},
                    {"reps", reps},
                    {"prefill_tok_s", std::round(double(n_prompt) * reps / pp_total * 100) / 100},
                    {"decode_tok_s", std::round(double(n_gen * parallel) * reps / tg_total * 100) / 100}};
  std::printf("%s\n", dump_json(out).c_str());
  return 0;
}

}  // namespace agentkv
