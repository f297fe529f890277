// The transfer modes an evaluation compares, named on the command line: the pure transfer, a native
// suffix ("last:K": the receiver recomputes the context's last K tokens; "last:P%": its last P percent),
// a hybrid by deviation
// ("dev:R": the receiver runs every projected token through its first layers and recomputes the
// share R whose K deviates most, transfer/kv_transfer.h), and both ("dev:R+last:K"). One parser for
// transfer-quality and transfer-retrieval so the two tables name modes the same way.
#pragma once

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

}  // namespace agentkv
