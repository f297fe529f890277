#include "lab/transfer/transfer_ttft.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kv/direct_prefill.h"
#include "lab/transfer/transfer_quality.h"
#include "ops/argmax.h"

namespace agentkv {

namespace {

using TtftClock = std::chrono::steady_clock;

int32_t argmax(const std::vector<float>& v) { return agentkv::argmax(v.data(), int64_t(v.size())); }

}  // namespace

Result<std::vector<TtftSample>> measure_ttft(const TransferMap& map, const LoadedModel& sender,
                                             const LoadedModel& receiver, std::string_view context, ThreadPool& pool,
                                             KvTransferOptions opt, int repeats) {
  const std::vector<int32_t> stoks = sender.tokenizer->encode(context, sender.tokenizer->add_bos_default(), false);
  const int64_t n_guess = int64_t(context.size()) + 64;  // a token has at least one byte (plus BOS)
  std::unique_ptr<KvManager> skv, rkv;
  AGENTKV_ASSIGN_OR_RETURN(skv, private_kv_manager(sender, int64_t(stoks.size()) + 64, 16));
  AGENTKV_ASSIGN_OR_RETURN(rkv, private_kv_manager(receiver, 2 * n_guess, 16));
  KvSequence sender_seq(*skv);
  AGENTKV_TRY(prefill_sequence(*sender.model, *skv, sender_seq, stoks, pool));

  TtftSample out;
  out.n_sender_tokens = int64_t(stoks.size());
  std::vector<float> native_logits(size_t(receiver.config().n_vocab)), transfer_logits(native_logits.size());
  int32_t native_first_token = -1, transfer_first_token = -1;

  auto run_native = [&]() -> Status {
    const auto t0 = TtftClock::now();
    const std::vector<int32_t> rtoks = receiver.tokenizer->encode(context, receiver.tokenizer->add_bos_default(), false);
    KvSequence seq(*rkv);
    AGENTKV_TRY(prefill_sequence(*receiver.model, *rkv, seq, rtoks, pool, RowOutputs{&native_logits}));
    native_first_token = argmax(native_logits);
    out.native_s = std::chrono::duration<double>(TtftClock::now() - t0).count();
    out.n_receiver_tokens = int64_t(rtoks.size());
    return Status::ok_status();
  };
  auto run_transfer = [&]() -> Status {
    const auto t0 = TtftClock::now();
    KvSequence seq(*rkv);
    opt.native_suffix = std::max(1, opt.native_suffix);
    opt.last_logits = transfer_logits.data();
    auto rep = transfer_kv_cache(map, sender, *skv, sender_seq, receiver, *rkv, seq, context, pool, opt);
    if (!rep.ok()) return make_error(rep.error());
    transfer_first_token = argmax(transfer_logits);
    out.transfer_s = std::chrono::duration<double>(TtftClock::now() - t0).count();
    out.transfer = *rep;
    return Status::ok_status();
  };
  std::vector<TtftSample> samples;
  for (int rep = 0; rep < repeats; ++rep) {
    if (rep % 2 == 0) {
      AGENTKV_TRY(run_native());
      AGENTKV_TRY(run_transfer());
    } else {
      AGENTKV_TRY(run_transfer());
      AGENTKV_TRY(run_native());
    }
    out.same_first_token = native_first_token == transfer_first_token;
    samples.push_back(out);
  }
  return samples;
}

}  // namespace agentkv
