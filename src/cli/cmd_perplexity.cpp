#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/perplexity.h"

namespace agentkv {

int cmd_perplexity(int argc, char** argv) {
  std::string model = "smollm2", path;
  int64_t ctx = 512, threads = 0;
  ArgParser p("perplexity", "Perplexity over a text file: chunks of --ctx tokens, NLL over the second half of each.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("-f,--file", &path, "text file", true);
  p.add_int("-c,--ctx", &ctx, "chunk / context size in tokens", 4, 1 << 20);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto text = read_text_file(path, "-f");
  if (!text.ok()) return cli_fail(text.error());
  auto lm = load_model(model, ModelOptions{.n_ctx = int(ctx)});  // LongRoPE files pick their factors by it
  if (!lm.ok()) return cli_fail(lm.error());
  ThreadPool pool{int(threads)};
  auto r = perplexity(**lm, *text, int(ctx), pool, [](int chunk, double ppl) {
    std::fprintf(stdout, "[%d]%.4f ", chunk, ppl);
    std::fflush(stdout);
  });
  if (!r.ok()) return cli_fail(r.error());
  std::fprintf(stdout, "\n%lld tokens, %d chunks of %lld, %lld scored\nppl = %.4f\n", (long long)r->n_tokens,
               r->n_chunks, (long long)ctx, (long long)r->n_scored, r->ppl);
  return 0;
}

}  // namespace agentkv
