#include "lab/transfer/transfer_retrieval.h"

#include <algorithm>

#include "kv/direct_prefill.h"
#include "lab/transfer/transfer_quality.h"

namespace agentkv {

namespace {

// Enough tokens for a few words in either tokenizer; only the expected prefix is compared.
constexpr int kNewTokens = 16;

// How many probes of the context `seq` holds the receiver answers.
Result<int> count_hits(const LoadedModel& lm, const KvSequence& seq, const std::vector<RetrievalProbe>& probes,
                       ThreadPool& pool) {
  int hits = 0;
  for (const RetrievalProbe& p : probes) {
    // With an empty context the probe starts the sequence, so it takes the model's BOS.
    const bool bos = seq.n_tokens() == 0 && lm.tokenizer->add_bos_default();
    const std::vector<int32_t> prompt = lm.tokenizer->encode(p.prompt, bos, false);
    std::string out;
    // The text after its leading whitespace (number probes).
    auto trimmed = [](const std::string& text) { return text.substr(std::min(text.find_first_not_of(" \t\n"), text.size())); };
    auto digits = [](const std::string& t) {
      size_t n = 0;
      while (n < t.size() && t[n] >= '0' && t[n] <= '9') ++n;
      return n;
    };
    // Settled once the text covers the expected words or has left them (for a number: once its run
    // of digits has ended, or is longer than the key, or the text starts with something else).
    auto settled = [&](const std::string& text) {
      if (p.number) {
        const std::string t = trimmed(text);
        const size_t n = digits(t);
        return (!t.empty() && n < t.size()) || n > p.expected.size();
      }
      const size_t n = std::min(text.size(), p.expected.size());
      return text.size() >= p.expected.size() || text.compare(0, n, p.expected, 0, n) != 0;
    };
    AGENTKV_ASSIGN_OR_RETURN(out, greedy_continuation(lm, seq, prompt, kNewTokens, pool, settled));
    if (p.number) {
      const std::string t = trimmed(out);
      hits += t.substr(0, digits(t)) == p.expected;
    } else {
      hits += out.compare(0, p.expected.size(), p.expected) == 0;
    }
  }
  return hits;
}

}  // namespace

Result<RetrievalHits> measure_retrieval(const TransferMap& map, const LoadedModel& sender, const LoadedModel& receiver,
                                        const std::string& context, const std::vector<RetrievalProbe>& probes,
                                        std::span<const KvTransferOptions> hybrids, ThreadPool& pool) {
  const std::vector<int32_t> stoks = sender.tokenizer->encode(context, sender.tokenizer->add_bos_default(), false);
  const std::vector<int32_t> rtoks = receiver.tokenizer->encode(context, receiver.tokenizer->add_bos_default(), false);
  std::unique_ptr<KvManager> skv, rkv;
  AGENTKV_ASSIGN_OR_RETURN(skv, private_kv_manager(sender, int64_t(stoks.size()) + 64, 16));
  // One context at a time plus a probe's fork and its copied partial block.
  AGENTKV_ASSIGN_OR_RETURN(rkv, private_kv_manager(receiver, int64_t(rtoks.size()) + 256, 16));
  KvSequence sender_seq(*skv);
  AGENTKV_TRY(prefill_sequence(*sender.model, *skv, sender_seq, stoks, pool));

  RetrievalHits h;
  h.n_probes = int(probes.size());
  h.n_context_tokens = int64_t(rtoks.size());
  {
    KvSequence native(*rkv);
    AGENTKV_TRY(prefill_sequence(*receiver.model, *rkv, native, rtoks, pool));
    AGENTKV_ASSIGN_OR_RETURN(h.native, count_hits(receiver, native, probes, pool));
  }
  {
    KvSequence empty(*rkv);
    AGENTKV_ASSIGN_OR_RETURN(h.no_context, count_hits(receiver, empty, probes, pool));
  }
  KvTransferReport rep;
  auto transferred_hits = [&](const KvTransferOptions& opt) -> Result<int> {
    KvSequence seq(*rkv);
    AGENTKV_ASSIGN_OR_RETURN(rep, transfer_kv_cache(map, sender, *skv, sender_seq, receiver, *rkv, seq, context, pool, opt));
    return count_hits(receiver, seq, probes, pool);
  };
  AGENTKV_ASSIGN_OR_RETURN(h.transferred, transferred_hits(KvTransferOptions{}));
  h.transferred_report = rep;
  for (const KvTransferOptions& opt : hybrids) {
    int hits = 0;
    AGENTKV_ASSIGN_OR_RETURN(hits, transferred_hits(opt));
    h.hybrid.push_back(hits);
    h.reports.push_back(rep);
  }
  return h;
}

}  // namespace agentkv
