// What the KV-transfer commands share: the --from / --to / --map options, loading the two models
// and the map (refused for another pair), and comma-separated integer options.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/arg_parser.h"
#include "model/loaded_model.h"
#include "transfer/transfer_map.h"

namespace agentkv {

struct TransferPairArgs {
  std::string from, to, map;
};
void add_transfer_pair_options(ArgParser& p, TransferPairArgs* a);

struct TransferSetup {
  std::unique_ptr<LoadedModel> sender, receiver;
  TransferMap map;
  std::string corpus;  // the text of corpus_path, when one is given
};
// The corpus is read first, so that a wrong path fails before the models load.
Result<TransferSetup> load_transfer_setup(const TransferPairArgs& a, const std::string& corpus_path = "");

// The receiver-token counts a hybrid by rarity ranks by: the map's own, or, when rare_corpus names the
// map's fitting text again (for a map fitted before maps kept counts), that text's.
Result<std::vector<uint32_t>> rare_counts_for(const TransferSetup& setup, const std::string& rare_corpus);

// "8,32" -> {8, 32}; an error names the flag and the item that is not an integer in [lo, hi].
Result<std::vector<int64_t>> parse_int_list(const std::string& flag, const std::string& s, int64_t lo, int64_t hi);

}  // namespace agentkv
