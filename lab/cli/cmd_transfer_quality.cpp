// agentkv transfer-quality: on held-out passages, the receiver's NLL of each passage's continuation
// after (a) native prefill of its context, (b) the context's cache transferred from the sender
// with a fitted map, (c) no context; and the share of the context benefit the transfer keeps.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "cli/transfer_cli.h"
#include "lab/transfer/context_passages.h"
#include "lab/transfer/hybrid_modes.h"
#include "lab/transfer/transfer_quality.h"

namespace agentkv {

int cmd_transfer_quality(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus, hybrid_arg, csv_path, rare_corpus;
  int64_t threads = 0, ctx_bytes = 1500, cont_bytes = 400, max_passages = 8, native_last = -1, check_layer = 1;
  ArgParser p("transfer-quality",
              "Receiver NLL of held-out continuations: native prefill vs transferred cache (pure and each hybrid "
              "mode) vs no context; per mode the share of the context benefit kept and the time to build the cache.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--corpus", &corpus, "held-out text, passages separated by blank lines (not the fitting corpus)", true);
  p.add_int("--context-bytes", &ctx_bytes, "context length in bytes (cut at a space)", 16, 1 << 20);
  p.add_int("--continuation-bytes", &cont_bytes, "continuation length in bytes", 8, 1 << 20);
  p.add_int("--max-passages", &max_passages, "passages to score", 1, 1 << 20);
  p.add_string("--hybrid", &hybrid_arg,
               "hybrid modes besides the pure transfer, comma-separated: last:K (the receiver recomputes the "
               "context's last K tokens), last:P% (its last P percent), dev:R (it recomputes the share R of tokens whose K deviates most at "
               "--check-layer), first:K (its first K tokens; default 1), rare:R or rare:P% (the share of the context's tokens least "
               "seen in the map's fitting text; rare:R:N, at most N of them; each with around:B:A neighbours before and after it, default 4:1; around:W, W either side), parts joined by '+' (dev:R+last:K)");
  p.add_int("--check-layer", &check_layer, "dev:R modes: every token runs natively through layers 0..this one", 0, 1024);
  p.add_string("--rare-corpus", &rare_corpus,
               "rare:R modes: the map's fitting text (fit-transfer --corpus), whose token counts rank the context's tokens, "
               "for a map fitted before maps kept them (default: the map's own counts)");
  p.add_int("--native-last", &native_last, "same as --hybrid last:N (older form)", -1, 1 << 20);
  p.add_string("--csv", &csv_path, "also write the per-mode means to this CSV file (for scripts/plot_transfer_tradeoff.py)");
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto hybrids = parse_hybrid_modes("--hybrid", hybrid_arg, int(check_layer));
  if (!hybrids.ok()) return cli_fail(hybrids.error());
  std::vector<HybridMode> modes{HybridMode{"transfer", {}}};
  if (native_last >= 0) {
    modes.push_back(HybridMode{"last:" + std::to_string(native_last), {}});
    modes.back().options.native_suffix = int(native_last);
  }
  modes.insert(modes.end(), hybrids->begin(), hybrids->end());
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const std::string& text = setup->corpus;
  const LoadedModel& sender = *setup->sender;
  const LoadedModel& receiver = *setup->receiver;
  if (check_layer >= receiver.config().n_layer)
    return cli_fail("--check-layer " + std::to_string(check_layer) + ": " + receiver.name + " has " +
                    std::to_string(receiver.config().n_layer) + " layers");
  auto rare_counts = rare_counts_for(*setup, rare_corpus);
  if (!rare_counts.ok()) return cli_fail(rare_counts.error());
  if (auto st = attach_rare_counts(modes, *rare_counts); !st.ok()) return cli_fail(st.error());
  std::vector<KvTransferOptions> options;
  for (const HybridMode& m : modes) options.push_back(m.options);
  ThreadPool pool{int(threads)};
  // Sums over passages: the shared NLLs and native prefill time, then per mode.
  struct Sum {
    double nll = 0, kl = 0, agree = 0, transfer_s = 0, work = 0, align_s = 0, project_s = 0, native_s = 0;
  };
  std::vector<Sum> sums(modes.size());
  double a = 0, c = 0, t_prefill = 0;
  int n = 0;
  std::printf("%-4s %-18s %6s %6s %9s %9s %9s %8s %7s %6s %10s %10s\n", "#", "mode", "ctx", "cont", "native", "transfer",
              "no-ctx", "kept", "top1", "work", "prefill_s", "transfer_s");
  for (const ContextPassage& cp : context_passages(text, size_t(ctx_bytes), size_t(cont_bytes), size_t(max_passages))) {
    const std::string& context = cp.context;
    const std::string& continuation = cp.continuation;
    auto results = measure_transfer_modes(setup->map, sender, receiver, context, continuation, pool, options);
    if (!results.ok()) return cli_fail(results.error());
    for (size_t i = 0; i < modes.size(); ++i) {
      const TransferQuality& q = (*results)[i].quality;
      const double work = native_work_share((*results)[i].report, receiver.config().n_layer);
      std::printf("%-4d %-18s %6lld %6lld %9.4f %9.4f %9.4f %8.3f %7.3f %6.3f %10.3f %10.3f\n", n, modes[i].label.c_str(),
                  (long long)q.n_context_tokens, (long long)q.n_continuation, q.nll_native, q.nll_transfer,
                  q.nll_no_context, q.kept(), q.top1_agreement, work, q.native_prefill_s, q.transfer_s);
      sums[i].nll += q.nll_transfer;
      sums[i].kl += q.mean_kl;
      sums[i].agree += q.top1_agreement;
      sums[i].transfer_s += q.transfer_s;
      sums[i].work += work;
      sums[i].align_s += (*results)[i].report.align_s;
      sums[i].project_s += (*results)[i].report.project_s;
      sums[i].native_s += (*results)[i].report.native_s;
    }
    const TransferQuality& q0 = results->front().quality;
    a += q0.nll_native;
    c += q0.nll_no_context;
    t_prefill += q0.native_prefill_s;
    std::fflush(stdout);
    ++n;
  }
  if (n == 0) return cli_fail("no passage long enough in '" + corpus + "'");
  std::printf("mean over %d passages: NLL native %.4f, no context %.4f; native prefill %.3f s\n", n, a / n, c / n,
              t_prefill / n);
  std::FILE* csv = nullptr;
  if (!csv_path.empty()) {
    csv = std::fopen(csv_path.c_str(), "w");
    if (!csv) return cli_fail("--csv: cannot write '" + csv_path + "'");
    std::fprintf(csv, "sender,receiver,mode,passages,kept,kl,top1,native_work,ttft_saving,transfer_s,prefill_s,align_s,project_s,native_s\n");
  }
  for (size_t i = 0; i < modes.size(); ++i) {
    const Sum& m = sums[i];
    const double kept = (c - m.nll) / (c - a);
    const double saving = 1.0 - m.transfer_s / t_prefill;
    std::printf("  %-18s NLL %.4f kept (c-b)/(c-a) %.3f  KL %.4f  top-1 %.3f  native work %.1f%%  cache in %.3f s "
                "(%.0f%% below prefill: align %.3f, project %.3f, native %.3f)\n",
                modes[i].label.c_str(), m.nll / n, kept, m.kl / n, m.agree / n, 100.0 * m.work / n, m.transfer_s / n,
                100.0 * saving, m.align_s / n, m.project_s / n, m.native_s / n);
    if (csv)
      std::fprintf(csv, "%s,%s,%s,%d,%.4f,%.5f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", sender.name.c_str(), receiver.name.c_str(),
                   modes[i].label.c_str(), n, kept, m.kl / n, m.agree / n, m.work / n, saving, m.transfer_s / n,
                   t_prefill / n, m.align_s / n, m.project_s / n, m.native_s / n);
  }
  if (csv && std::fclose(csv) != 0) return cli_fail("--csv: cannot write '" + csv_path + "'");
  return 0;
}

}  // namespace agentkv
