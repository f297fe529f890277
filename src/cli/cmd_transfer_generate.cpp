// agentkv transfer-generate: the receiver side of a transfer across processes. Loads a sender's
// cache file (agentkv kv-save), transfers it into the receiver with a fitted map, and continues
// the context greedily after an optional prompt, without prefilling the context.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/transfer_cli.h"
#include "gguf/gguf_file.h"
#include "kv/direct_prefill.h"
#include "ops/argmax.h"
#include "transfer/kv_cache_file.h"
#include "transfer/kv_transfer.h"
#include "transfer/context_prefill.h"
#include "util/input_file.h"

namespace agentkv {

int cmd_transfer_generate(int argc, char** argv) {
  TransferPairArgs pair;
  std::string cache_path, prompt;
  int64_t threads = 0, n_new = 32, native_last = 0;
  ArgParser p("transfer-generate", "Load a sender's cache file, transfer it to the receiver and generate from it (greedy).");
  add_transfer_pair_options(p, &pair);
  p.add_string("--sender-cache", &cache_path, "cache file from kv-save, written by the sender model", true);
  p.add_string("-p,--prompt", &prompt, "text after the context (default: none, the context is continued)");
  p.add_int("-n,--n-predict", &n_new, "tokens to generate", 1, 1 << 16);
  p.add_int("--native-last", &native_last, "hybrid: the receiver recomputes the context's last N tokens itself", 0, 1 << 20);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  // The file's size bounds its token count (K and V, f16, per token and layer): no second read. Only a
  // regular file has a size (a directory's is not one, and a FIFO would block the open); checked
  // before the models load.
  auto cache = InputFile::open(cache_path, kMaxGgufBytes, "--sender-cache");
  if (!cache.ok()) return cli_fail(cache.error());
  auto setup = load_transfer_setup(pair);
  if (!setup.ok()) return cli_fail(setup.error());
  const LoadedModel& sender = *setup->sender;
  const LoadedModel& receiver = *setup->receiver;
  ThreadPool pool{int(threads)};
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const int64_t max_tokens = cache->size() / (4 * int64_t(sender.config().n_layer) * sender.config().kv_dim()) + 64;
  auto skv = private_kv_manager(sender, max_tokens, 16);
  if (!skv.ok()) return cli_fail(skv.error());
  KvSequence sender_seq(**skv);
  auto text = load_kv_cache_file(cache_path, sender, **skv, sender_seq);
  if (!text.ok()) return cli_fail(text.error());
  const auto t1 = Clock::now();
  auto rkv = private_kv_manager(receiver, int64_t(text->size()) + int64_t(prompt.size()) + n_new + 128, 16);
  if (!rkv.ok()) return cli_fail(rkv.error());
  KvSequence seq(**rkv);
  KvTransferOptions xo;
  xo.native_suffix = int(native_last);
  // Without a prompt the context itself is continued: its last token is run by the receiver (at
  // least a hybrid of 1), whose logits give the first new token.
  std::vector<float> logits(size_t(receiver.config().n_vocab));
  if (prompt.empty()) {
    xo.native_suffix = std::max(1, xo.native_suffix);
    xo.last_logits = logits.data();
  }
  auto rep = transfer_kv_cache(setup->map, sender, **skv, sender_seq, receiver, **rkv, seq, *text, pool, xo);
  if (!rep.ok()) return cli_fail(rep.error());
  const auto t2 = Clock::now();
  std::vector<int32_t> next = receiver.tokenizer->encode(prompt, false, false);
  std::string first;
  int64_t n_rest = n_new;
  if (next.empty()) {
    const int32_t tok = argmax(logits.data(), int64_t(logits.size()));
    first = receiver.tokenizer->decode(std::vector<int32_t>{tok});
    next.push_back(tok);
    --n_rest;
  }
  Result<std::string> out = std::string();
  if (n_rest > 0) out = greedy_continuation(receiver, seq, next, int(n_rest), pool);
  if (!out.ok()) return cli_fail(out.error());
  *out = first + *out;
  const auto t3 = Clock::now();
  auto s = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  std::printf("%s%s\n", prompt.c_str(), out->c_str());
  std::fprintf(stderr,
               "sender cache: %lld %s tokens loaded in %.3f s; transfer to %lld %s tokens (%lld projected) in %.3f s; "
               "%lld tokens generated in %.3f s\n",
               (long long)sender_seq.n_tokens(), sender.name.c_str(), s(t1 - t0), (long long)rep->n_receiver_tokens,
               receiver.name.c_str(), (long long)rep->n_projected, s(t2 - t1), (long long)n_new, s(t3 - t2));
  return 0;
}

}  // namespace agentkv
