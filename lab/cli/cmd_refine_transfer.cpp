// agentkv refine-transfer: refines a fitted transfer map by the receiver's own continuation loss
// over a transferred context (lab/transfer/transfer_refine.h) and writes the refined map.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/transfer_cli.h"
#include "lab/cli/lab_commands.h"
#include "lab/transfer/context_passages.h"
#include "lab/transfer/transfer_refine.h"
#include "util/progress_bar.h"

namespace agentkv {

int cmd_refine_transfer(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus, out;
  int64_t threads = 0, ctx_bytes = 4500, cont_bytes = 400, max_passages = 0, epochs = 1, queries = 32;
  double lr = 0.0005, share = 0.15;
  ArgParser p("refine-transfer",
              "Refine a fitted transfer map by what the context is worth to the receiver: per passage, the context "
              "is transferred with the map (a hybrid with the receiver's own last --native-share), the receiver's NLL "
              "of the continuation is backpropagated into the transferred K/V and through the map, one step per "
              "passage (preconditioned by the features' Gram matrix). Fit on text apart from the held-out text "
              "transfer-quality scores.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--corpus", &corpus, "fitting text, passages separated by blank lines", true);
  p.add_string("--out", &out, "refined map file to write (.gguf)", true);
  p.add_int("--context-bytes", &ctx_bytes, "context length in bytes (cut at a space)", 16, 1 << 20);
  p.add_int("--continuation-bytes", &cont_bytes, "continuation length in bytes", 8, 1 << 20);
  p.add_int("--max-passages", &max_passages, "use at most this many passages (0 = all)", 0, 1 << 30);
  p.add_int("--epochs", &epochs, "passes over the passages", 1, 1000);
  p.add_int("--queries", &queries, "continuation positions per passage in the loss (0 = all)", 0, 1 << 20);
  p.add_float("--lr", &lr, "each step moves the transferred K/V by this share of their RMS", 1e-9, 1.0);
  p.add_float("--native-share", &share, "the share of the context's last tokens the receiver computes itself", 0.0, 0.99);
  bool verbose = false;
  p.add_flag("-v,--verbose", &verbose, "one line per passage on stderr: its NLL before the step and the step's length");
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const std::vector<ContextPassage> passages =
      context_passages(setup->corpus, size_t(ctx_bytes), size_t(cont_bytes), size_t(max_passages));
  if (passages.empty()) return cli_fail("no passage long enough in '" + corpus + "'");
  TransferRefineOptions opt;
  opt.native_suffix_share = share;
  opt.queries = int(queries);
  opt.lr = lr;
  auto refiner = TransferRefiner::create(std::move(setup->map), *setup->sender, *setup->receiver, opt);
  if (!refiner.ok()) return cli_fail(refiner.error());
  ThreadPool pool{int(threads)};
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t e = 0; e < epochs; ++e) {
    ProgressBar bar("refine-transfer epoch " + std::to_string(e + 1), int64_t(passages.size()));
    double sum = 0;
    for (size_t i = 0; i < passages.size(); ++i) {
      auto r = refiner->step(passages[i].context, passages[i].continuation, pool);
      if (!r.ok()) return cli_fail("passage " + std::to_string(i) + ": " + r.error());
      sum += r->nll;
      if (verbose) std::fprintf(stderr, "epoch %lld passage %zu: NLL %.4f (%lld queries, %lld transferred rows), step %.3g\n",
                                (long long)(e + 1), i, r->nll, (long long)r->queries, (long long)r->projected_rows,
                                r->step_scale);
      bar.update(int64_t(i + 1), "NLL " + std::to_string(sum / double(i + 1)).substr(0, 6));
    }
    bar.finish("");
    std::printf("epoch %lld: mean continuation NLL before each step %.4f over %zu passages\n", (long long)(e + 1),
                sum / double(passages.size()), passages.size());
    std::fflush(stdout);
  }
  const Status st = save_transfer_map(refiner->map(), out);
  if (!st.ok()) return cli_fail(st.error());
  std::printf("%s: refined over %zu passages x %lld epochs in %.1f s\n", out.c_str(), passages.size(), (long long)epochs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace agentkv
