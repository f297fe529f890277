#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/single_sequence.h"
#include "model/loaded_model.h"
#include "ops/cpu_features.h"
#include "util/json.h"

namespace agentkv {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)", 0, 1024);
  p.add_int("-r,--reps", &reps, "repetitions", 1, 1000);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
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
  Json out = Json::object();
  out.set("model", Json::string((*lm)->name));
  out.set("threads", Json::number(pool.size()));
  out.set("isa", Json::string(active_isa_name()));
  out.set("n_prompt", Json::number(double(n_prompt)));
  out.set("n_gen", Json::number(double(n_gen)));
  out.set("reps", Json::number(double(reps)));
  out.set("prefill_tok_s", Json::number(std::round(double(n_prompt) * reps / pp_total * 100) / 100));
  out.set("decode_tok_s", Json::number(std::round(double(n_gen) * reps / tg_total * 100) / 100));
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace agentkv
