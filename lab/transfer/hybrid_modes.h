// The transfer modes an evaluation compares, named on the command line: the pure transfer, a native
// suffix ("last:K": the receiver recomputes the context's last K tokens; "last:P%": its last P percent),
// a native prefix ("first:K": the receiver computes the context's first K tokens itself, its attention
// sinks; the default is 1, the first token), a hybrid by deviation
// ("dev:R": the receiver runs every projected token through its first layers and recomputes the
// share R whose K deviates most, transfer/kv_transfer.h), a hybrid by rarity ("rare:R" or "rare:P%": the
// share of the context's tokens that the map's fitting text held least, recomputed; the counts come from
// that text, --rare-corpus; "rare:R:N": at most N of them; "around:B:A" sets how many neighbours before and after each are recomputed with
// it, default 4:1; "around:W", W on either side), and any of them joined by '+' ("dev:R+last:K", "first:64+last:10%"). One parser for
// transfer-quality and transfer-retrieval so the two tables name modes the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transfer/kv_transfer.h"
#include "util/status.h"

namespace agentkv {

struct HybridMode {
  std::string label;  // as written: "last:32", "last:12.5%", "dev:0.15", "dev:0.1+last:16"
  KvTransferOptions options;
};

// Comma-separated specs; a bare number K means last:K (the older --hybrid form). check_layer is the
// layer dev:R modes check at. Errors name the spec at fault.
Result<std::vector<HybridMode>> parse_hybrid_modes(const std::string& flag, const std::string& specs, int check_layer);

// Points every rare:R mode at `counts` (which must outlive the modes): the map's own
// (TransferMap::receiver_token_counts), or for a map fitted before it kept them, those of its fitting
// text given again (--rare-corpus). An error when a rare:R mode has none.
Status attach_rare_counts(std::vector<HybridMode>& modes, const std::vector<uint32_t>& counts);

}  // namespace agentkv
