#include "lab/transfer/hybrid_modes.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace agentkv {

namespace {

// One "key:value" part of a spec into the options.
Status apply_part(const std::string& flag, const std::string& spec, const std::string& part, int check_layer,
                  KvTransferOptions& o) {
  const size_t colon = part.find(':');
  const std::string key = colon == std::string::npos ? "last" : part.substr(0, colon);
  const std::string value = colon == std::string::npos ? part : part.substr(colon + 1);
  char* end = nullptr;
  if (key == "last" && !value.empty() && value.back() == '%') {
    const std::string pct = value.substr(0, value.size() - 1);
    const double p = std::strtod(pct.c_str(), &end);
    if (pct.empty() || *end || !(p >= 0.0 && p <= 100.0))
      return make_error(flag + ": '" + spec + "': last:P% needs a percentage of the context in [0, 100]");
    o.native_suffix_share = p / 100.0;
  } else if (key == "last") {
    const long k = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end || k < 0 || k > (1 << 20))
      return make_error(flag + ": '" + spec + "': last:K needs a token count in [0, 1048576]");
    o.native_suffix = int(k);
  } else if (key == "first") {
    const long k = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end || k < 0 || k > (1 << 20))
      return make_error(flag + ": '" + spec + "': first:K needs a token count in [0, 1048576]");
    o.native_prefix = int(k);
  } else if (key == "dev") {
    const double r = std::strtod(value.c_str(), &end);
    if (value.empty() || *end || !(r >= 0.0 && r <= 1.0))
      return make_error(flag + ": '" + spec + "': dev:R needs a share in [0, 1]");
    o.check_layer = check_layer;
    o.recompute_ratio = r;
  } else if (key == "rare") {  // rare:R or rare:P%, then optionally :N (at most N tokens)
    const size_t colon2 = value.find(':');
    const std::string share = value.substr(0, colon2);
    const bool pct = !share.empty() && share.back() == '%';
    const std::string num = pct ? share.substr(0, share.size() - 1) : share;
    const double r = std::strtod(num.c_str(), &end) / (pct ? 100.0 : 1.0);
    if (num.empty() || *end || !(r >= 0.0 && r <= 1.0))
      return make_error(flag + ": '" + spec + "': rare:R needs a share in [0, 1] (or rare:P%, a percentage)");
    o.rare_share = r;
    if (colon2 != std::string::npos) {
      const std::string cap = value.substr(colon2 + 1);
      const long n = std::strtol(cap.c_str(), &end, 10);
      if (cap.empty() || *end || n < 1 || n > (1 << 20))
        return make_error(flag + ": '" + spec + "': rare:R:N needs a token count N in [1, 1048576] (at most N rare tokens)");
      o.rare_max_tokens = n;
    }
  } else if (key == "around") {  // around:W (either side) or around:B:A (before, after)
    const size_t colon2 = value.find(':');
    const std::string before = value.substr(0, colon2);
    const std::string after = colon2 == std::string::npos ? before : value.substr(colon2 + 1);
    char* end2 = nullptr;
    const long b = std::strtol(before.c_str(), &end, 10), a = std::strtol(after.c_str(), &end2, 10);
    if (before.empty() || after.empty() || *end || *end2 || b < 0 || b > 4096 || a < 0 || a > 4096)
      return make_error(flag + ": '" + spec + "': around:W (or around:B:A, before and after) needs token counts in [0, 4096]");
    o.rare_window = int(b);
    o.rare_window_after = int(a);
  } else {
    return make_error(flag + ": '" + spec + "': expected last:K, last:P%, first:K, dev:R, rare:R, around:W or a combination joined by '+'");
  }
  return {};
}

}  // namespace

Result<std::vector<HybridMode>> parse_hybrid_modes(const std::string& flag, const std::string& specs, int check_layer) {
  std::vector<HybridMode> out;
  std::istringstream in(specs);
  std::string spec;
  while (std::getline(in, spec, ',')) {
    if (spec.empty()) continue;
    HybridMode m;
    m.label = spec;
    for (size_t at = 0; at <= spec.size();) {  // every '+'-separated part, empty ones too
      const size_t plus = std::min(spec.find('+', at), spec.size());
      AGENTKV_TRY(apply_part(flag, spec, spec.substr(at, plus - at), check_layer, m.options));
      at = plus + 1;
    }
    out.push_back(std::move(m));
  }
  return out;
}

Status attach_rare_counts(std::vector<HybridMode>& modes, const std::vector<uint32_t>& counts) {
  for (HybridMode& m : modes) {
    if (m.options.rare_share <= 0) continue;
    if (counts.empty())
      return make_error("--hybrid " + m.label + ": rare:R ranks tokens by their count in the map's fitting text, and this map "
                        "was fitted before maps kept those counts: give that text with --rare-corpus (or refit the map)");
    m.options.rare_counts = counts;
  }
  return {};
}

}  // namespace agentkv
