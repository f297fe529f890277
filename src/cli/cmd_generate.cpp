#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/generate.h"
#include "tokenizer/chat_template.h"

namespace agentkv {

int cmd_generate(int argc, char** argv) {
  std::string model = "smollm2", prompt, system, stop;
  int64_t n_predict = 128, threads = 0, seed = 0, top_k = 0, ctx = 0;
  double temp = 0.0, top_p = 1.0, min_p = 0.0, repeat_penalty = 1.0;
  bool chat = false, quiet = false;
  ArgParser p("generate", "Completes a prompt on one model and prints the completion.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("-p,--prompt", &prompt, "prompt text", true);
  p.add_int("-n,--n-predict", &n_predict, "maximum tokens to generate", 0, 1 << 20);
  p.add_flag("--chat", &chat, "wrap the prompt as a user turn in the model's chat template");
  p.add_string("--system", &system, "system message for --chat");
  p.add_float("--temp", &temp, "temperature (0 = greedy)", 0, 100);
  p.add_int("--top-k", &top_k, "top-k (0 = off)", 0, 1 << 30);
  p.add_float("--top-p", &top_p, "top-p", 1e-6, 1);
  p.add_float("--min-p", &min_p, "min-p", 0, 1);
  p.add_float("--repeat-penalty", &repeat_penalty, "repetition penalty (1 = off)", 1e-3, 100);
  p.add_int("--seed", &seed, "sampling seed", 0, INT64_MAX);
  p.add_string("--stop", &stop, "stop string");
  p.add_int("--ctx", &ctx, "context size (0 = prompt + n)", 0, 1 << 24);
  p.add_threads(&threads);
  p.add_flag("-q,--quiet", &quiet, "no timing line on stderr");
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const Tokenizer& tok = *(*lm)->tokenizer;
  std::vector<int32_t> ids;
  if (chat) {
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    auto text = apply_chat_template(tok, msgs, true);
    if (!text.ok()) return cli_fail(text.error());
    ids = tok.encode(*text, tok.add_bos_default(), true);
  } else {
    ids = tok.encode(prompt, tok.add_bos_default(), false);
  }
  GenerateOptions opt;
  opt.max_tokens = int(n_predict);
  opt.n_ctx = int(ctx);
  opt.sampling.temperature = float(temp);
  opt.sampling.top_k = int(top_k);
  opt.sampling.top_p = float(top_p);
  opt.sampling.min_p = float(min_p);
  opt.sampling.repetition_penalty = float(repeat_penalty);
  opt.sampling.seed = uint64_t(seed);
  if (!stop.empty()) opt.stop.push_back(stop);
  // LongRoPE files pick their factors by the context generate runs under.
  if (Status st = fit_model_to_context(**lm, generate_n_ctx((*lm)->config(), int64_t(ids.size()), opt)); !st.ok())
    return cli_fail(st.error());
  ThreadPool pool{int(threads)};
  auto res = generate(**lm, ids, opt, pool, [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  });
  if (!res.ok()) return cli_fail(res.error());
  std::fputc('\n', stdout);
  if (!quiet) {
    const double pf = res->prefill_seconds, dc = res->decode_seconds;
    std::fprintf(stderr, "[%d prompt tokens in %.3f s (%.1f tok/s), %zu generated in %.3f s (%.1f tok/s), finish: %s]\n",
                 res->n_prompt, pf, pf > 0 ? res->n_prompt / pf : 0.0, res->tokens.size(), dc,
                 dc > 0 ? double(res->tokens.size()) / dc : 0.0, finish_reason_name(res->finish_reason));
  }
  return 0;
}

}  // namespace agentkv
