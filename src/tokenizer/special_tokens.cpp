// Splitting text at special tokens (llama.cpp's tokenizer_st_partition). The order matters and is
// not "leftmost longest": each special token, longest text first, is searched in every raw
// fragment left so far, so a longer token wins even if a shorter one starts earlier.
#include <algorithm>

#include "tokenizer/tokenizer_core.h"

namespace agentkv {

void SpecialTrie::insert(std::string_view text, int32_t id) {
  uint32_t node = 0;
  for (char c : text) {
    const uint64_t key = (uint64_t{node} << 8) | static_cast<uint8_t>(c);
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      nodes_.push_back(Node{});
      it = edges_.emplace(key, static_cast<uint32_t>(nodes_.size() - 1)).first;
    }
    node = it->second;
  }
  nodes_[node].id = id;
}

void SpecialTrie::find_all(std::string_view text, std::vector<int32_t>& out) const {
  for (size_t start = 0; start < text.size(); ++start) {
    uint32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      auto it = edges_.find((uint64_t{node} << 8) | static_cast<uint8_t>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (nodes_[node].id >= 0) out.push_back(nodes_[node].id);
    }
  }
}

std::vector<Fragment> partition_special(const TokenizerCore& core, std::string_view text,
                                        bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{0, text.size(), -1});

  // Only tokens that occur somewhere in the text can split anything; find them in one pass and
  // visit them in llama.cpp's order.
  std::vector<int32_t> present;
  core.special_trie.find_all(text, present);
  std::sort(present.begin(), present.end(),
            [&](int32_t a, int32_t b) { return core.special_rank[a] < core.special_rank[b]; });
  present.erase(std::unique(present.begin(), present.end()), present.end());

  std::vector<Fragment> next;
  for (const int32_t id : present) {
    if (!parse_special && (core.attrs[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view needle = core.vocab.tokens[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view hay = text.substr(f.offset, f.length);
      size_t from = 0;
      while (true) {
        const size_t hit = hay.find(needle, from);
        if (hit == std::string_view::npos) break;
        if (hit > from) next.push_back(Fragment{f.offset + from, hit - from, -1});
        next.push_back(Fragment{f.offset + hit, needle.size(), id});
        from = hit + needle.size();
      }
      if (from < hay.size()) next.push_back(Fragment{f.offset + from, hay.size() - from, -1});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace agentkv
