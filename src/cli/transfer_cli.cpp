#include "cli/transfer_cli.h"

#include <cstdlib>

#include "cli/commands.h"

namespace agentkv {

void add_transfer_pair_options(ArgParser& p, TransferPairArgs* a) {
  p.add_string("--from", &a->from, "sender model alias or .gguf path", true);
  p.add_string("--to", &a->to, "receiver model alias or .gguf path", true);
  p.add_string("--map", &a->map, "map file from fit-transfer", true);
}

Result<TransferSetup> load_transfer_setup(const TransferPairArgs& a, const std::string& corpus_path) {
  std::string corpus;
  if (!corpus_path.empty()) AGENTKV_ASSIGN_OR_RETURN(corpus, read_text_file(corpus_path, "--corpus"));
  auto models = load_model_pair(a.from, a.to);
  if (!models.ok()) return models.status_error();
  TransferSetup s;
  s.sender = std::move(models->first);
  s.receiver = std::move(models->second);
  s.corpus = std::move(corpus);
  AGENTKV_ASSIGN_OR_RETURN(s.map, load_transfer_map(a.map, *s.sender, *s.receiver));
  return s;
}

Result<std::vector<uint32_t>> rare_counts_for(const TransferSetup& setup, const std::string& rare_corpus) {
  if (rare_corpus.empty()) return setup.map.receiver_token_counts;
  std::string text;
  AGENTKV_ASSIGN_OR_RETURN(text, read_text_file(rare_corpus, "--rare-corpus"));
  std::vector<uint32_t> counts;
  count_tokens(*setup.receiver->tokenizer, text, counts);
  return counts;
}

Result<std::vector<int64_t>> parse_int_list(const std::string& flag, const std::string& s, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (const std::string& item : split_commas(s)) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v < lo || v > hi)
      return make_error(flag + ": '" + item + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v);
  }
  if (out.empty()) return make_error(flag + ": empty list");
  return out;
}

}  // namespace agentkv
