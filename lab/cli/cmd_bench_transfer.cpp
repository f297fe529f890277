// agentkv bench-transfer: time to first token with a context transferred from the sender's cache
// vs the receiver's own prefill of the same context, at several receiver context lengths, median
// over repeats (lab/transfer/transfer_ttft.h says what each clock counts).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cli/commands.h"
#include "cli/transfer_cli.h"
#include "lab/cli/lab_commands.h"
#include "lab/transfer/hybrid_modes.h"
#include "lab/transfer/transfer_ttft.h"
#include "transfer/token_alignment.h"

namespace agentkv {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int cmd_bench_transfer(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus, lengths_arg = "256,512,1024,2048,4096", hybrid, rare_corpus;
  int64_t threads = 0, repeats = 3, native_last = 1, check_layer = 1;
  ArgParser p("bench-transfer",
              "Time to first token: context transferred from the sender's existing cache vs the receiver's "
              "own prefill.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--corpus", &corpus,
               "held-out text the contexts are cut from (its start, as many bytes as needed)", true);
  p.add_string("--lengths", &lengths_arg, "receiver context lengths in tokens, comma-separated");
  p.add_int("--repeats", &repeats, "runs per length (the median is reported)", 1, 1000);
  p.add_int("--native-last", &native_last,
            "the receiver recomputes the context's last N tokens (>= 1: gives the first token)", 1, 1 << 20);
  p.add_string("--hybrid", &hybrid,
               "instead of --native-last, time each of these modes (comma-separated): last:K, last:P% (the last P "
               "percent of the context), first:K (its first K tokens; default 1), dev:R (the share R whose "
               "K deviates most at --check-layer is recomputed), rare:R or rare:R:N (the share R of the context's tokens least seen "
               "in the map's fitting text, at most N of them, each with around:B:A neighbours, default 4:1), parts joined by '+' "
               "(dev:R+last:K); every mode runs at least the last token");
  p.add_string("--rare-corpus", &rare_corpus,
               "rare:R modes: the map's fitting text, whose token counts rank the context's tokens, for a map fitted "
               "before maps kept them (default: the map's own counts)");
  p.add_int("--check-layer", &check_layer,
            "dev:R modes: every token runs natively through layers 0..this one", 0, 1024);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto lengths = parse_int_list("--lengths", lengths_arg, 2, 1 << 20);
  if (!lengths.ok()) return cli_fail(lengths.error());
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const std::string& text = setup->corpus;
  const LoadedModel& sender = *setup->sender;
  const LoadedModel& receiver = *setup->receiver;
  const TransferMap& map = setup->map;
  auto spans = tokenize_with_spans(*receiver.tokenizer, text, receiver.tokenizer->add_bos_default());
  if (!spans.ok()) return cli_fail("corpus '" + corpus + "': " + spans.error());
  if (check_layer >= receiver.config().n_layer)
    return cli_fail("--check-layer " + std::to_string(check_layer) + ": the receiver has " +
                    std::to_string(receiver.config().n_layer) + " layers");
  std::vector<HybridMode> modes;
  if (hybrid.empty()) {
    modes.push_back(HybridMode{"last:" + std::to_string(native_last), {}});
    modes.back().options.native_suffix = int(native_last);
  } else {
    auto parsed = parse_hybrid_modes("--hybrid", hybrid, int(check_layer));
    if (!parsed.ok()) return cli_fail(parsed.error());
    modes = std::move(*parsed);
  }
  auto rare_counts = rare_counts_for(*setup, rare_corpus);
  if (!rare_counts.ok()) return cli_fail(rare_counts.error());
  if (auto st = attach_rare_counts(modes, *rare_counts); !st.ok()) return cli_fail(st.error());
  ThreadPool pool{int(threads)};
  std::printf("%s -> %s, %d threads, %lld repeats (median)\n", sender.name.c_str(), receiver.name.c_str(),
              pool.size(), (long long)repeats);
  std::printf("%7s %-16s %7s %7s %10s %10s %9s %8s %8s %8s %7s\n", "target", "mode", "r_tok", "s_tok",
              "native_s", "transfer_s", "less", "align_s", "proj_s", "recv_s", "same1st");
  for (int64_t want : *lengths) {
    if (want > int64_t(spans->size()))
      return cli_fail("corpus '" + corpus + "' has only " + std::to_string(spans->size()) +
                      " receiver tokens, " + std::to_string(want) + " asked");
    // The context is the corpus's start up to receiver token `want` (whole tokens, exact bytes).
    const std::string context = text.substr(0, spans->end[size_t(want - 1)]);
    for (const HybridMode& mode : modes) {
      std::vector<double> nat, xfer, al, pr, rv;
      int same = 0;
      auto samples = measure_ttft(map, sender, receiver, context, pool, mode.options, int(repeats));
      if (!samples.ok()) return cli_fail(samples.error());
      for (const TtftSample& s : *samples) {
        nat.push_back(s.native_s);
        xfer.push_back(s.transfer_s);
        al.push_back(s.transfer.align_s);
        pr.push_back(s.transfer.project_s);
        rv.push_back(s.transfer.native_s);
        same += s.same_first_token;
      }
      const TtftSample& last = samples->back();
      const double mn = median(nat), mx = median(xfer);
      std::printf("%7lld %-16s %7lld %7lld %10.3f %10.3f %8.1f%% %8.3f %8.3f %8.3f %4d/%lld\n",
                  (long long)want, mode.label.c_str(), (long long)last.n_receiver_tokens,
                  (long long)last.n_sender_tokens, mn, mx, 100.0 * (1.0 - mx / mn), median(al), median(pr),
                  median(rv), same, (long long)repeats);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace agentkv
