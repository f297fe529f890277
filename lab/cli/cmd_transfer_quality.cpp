// agentkv transfer-quality: on held-out passages, the receiver's NLL of each passage's continuation
// after (a) native prefill of its context, (b) the context's cache transferred from the sender
// with a fitted map, (c) no context; and the share of the context benefit the transfer keeps.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "cli/transfer_cli.h"
#include "lab/transfer/transfer_quality.h"

namespace agentkv {

namespace {

// Cut at the last space at or before n bytes, so both parts are whole words.
size_t space_before(const std::string& s, size_t n) {
  if (n >= s.size()) return s.size();
  const size_t sp = s.rfind(' ', n);
  return sp == std::string::npos ? n : sp;
}

}  // namespace

int cmd_transfer_quality(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus;
  int64_t threads = 0, ctx_bytes = 1500, cont_bytes = 400, max_passages = 8, native_last = 0;
  ArgParser p("transfer-quality", "Receiver NLL of held-out continuations: native prefill vs transferred cache vs no context.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--corpus", &corpus, "held-out text, passages separated by blank lines (not the fitting corpus)", true);
  p.add_int("--context-bytes", &ctx_bytes, "context length in bytes (cut at a space)", 16, 1 << 20);
  p.add_int("--continuation-bytes", &cont_bytes, "continuation length in bytes", 8, 1 << 20);
  p.add_int("--max-passages", &max_passages, "passages to score", 1, 1 << 20);
  p.add_int("--native-last", &native_last, "hybrid: the receiver recomputes the context's last N tokens itself", 0, 1 << 20);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const std::string& text = setup->corpus;
  const LoadedModel& sender = *setup->sender;
  const LoadedModel& receiver = *setup->receiver;
  ThreadPool pool{int(threads)};
  double a = 0, b = 0, c = 0, kl = 0, agree = 0, t_prefill = 0, t_transfer = 0;
  int n = 0;
  std::printf("%-4s %6s %6s %9s %9s %9s %8s %7s %10s %10s\n", "#", "ctx", "cont", "native", "transfer", "no-ctx", "kept",
              "top1", "prefill_s", "transfer_s");
  for (size_t at = 0; at < text.size() && n < max_passages;) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    const std::string passage = text.substr(at, end - at);
    at = end + 2;
    const size_t cut = space_before(passage, size_t(ctx_bytes));
    if (cut + 2 * size_t(cont_bytes) / 3 > passage.size()) continue;  // too short for a real continuation
    const std::string context = passage.substr(0, cut);
    const std::string rest = passage.substr(cut);
    const std::string continuation = rest.substr(0, space_before(rest, size_t(cont_bytes)));
    KvTransferOptions xo;
    xo.native_suffix = int(native_last);
    auto q = measure_transfer_quality(setup->map, sender, receiver, context, continuation, pool, xo);
    if (!q.ok()) return cli_fail(q.error());
    std::printf("%-4d %6lld %6lld %9.4f %9.4f %9.4f %8.3f %7.3f %10.3f %10.3f\n", n, (long long)q->n_context_tokens,
                (long long)q->n_continuation, q->nll_native, q->nll_transfer, q->nll_no_context, q->kept(),
                q->top1_agreement, q->native_prefill_s, q->transfer_s);
    t_prefill += q->native_prefill_s;
    t_transfer += q->transfer_s;
    std::fflush(stdout);
    a += q->nll_native;
    b += q->nll_transfer;
    c += q->nll_no_context;
    kl += q->mean_kl;
    agree += q->top1_agreement;
    ++n;
  }
  if (n == 0) return cli_fail("no passage long enough in '" + corpus + "'");
  std::printf("mean over %d passages: NLL native %.4f, transferred %.4f, no context %.4f; kept (c-b)/(c-a) = %.3f; "
              "KL(native||transfer) %.4f; top-1 agreement %.3f; context cache in %.3f s (transfer) vs %.3f s (prefill)\n",
              n, a / n, b / n, c / n, (c - b) / (c - a), kl / n, agree / n, t_transfer / n, t_prefill / n);
  return 0;
}

}  // namespace agentkv
