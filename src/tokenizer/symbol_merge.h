// The merge loop shared by byte-level BPE (rank order) and SentencePiece BPE (score order): text is
// split into characters, candidate pairs go into a priority queue, the best pair is merged and its
// new neighbours are queued, stale entries are skipped when popped.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_core.h"
#include "tokenizer/unicode.h"

namespace agentkv {

struct MergeSymbol {
  int prev, next;
  size_t off, len;
};

// Characters by the lead byte's announced length, clipped at the end (invalid bytes stay single).
inline std::vector<MergeSymbol> split_symbols(std::string_view text) {
  std::vector<MergeSymbol> syms;
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(text.size() - off, unicode::utf8_len(static_cast<uint8_t>(text[off])));
    const int idx = static_cast<int>(syms.size());
    syms.push_back(MergeSymbol{idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  return syms;
}

// Bigram needs members left, right, size; Worse orders the queue (top = best);
// make(l, r, text_of_pair, push) calls push(Bigram) when the pair may merge.
template <class Bigram, class Worse, class Make>
void run_merges(std::vector<MergeSymbol>& syms, Make make) {
  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    make(l, r, [&](const Bigram& b) { queue.push(b); });
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    MergeSymbol& l = syms[b.left];
    MergeSymbol& r = syms[b.right];
    // Stale if either side was merged away or grew since the pair was queued (a symbol only grows
    // by absorbing its right neighbour, so comparing sizes is exact).
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
}

// Emits the surviving symbols as token ids; a symbol that is not a token goes byte by byte through
// byte_id(uint8_t) -> id or -1 (dropped).
template <class ByteId>
void emit_symbols(const TokenizerCore& core, std::string_view text, const std::vector<MergeSymbol>& syms,
                  std::vector<int32_t>& out, ByteId byte_id) {
  for (int i = 0; i >= 0 && !syms.empty(); i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].off, syms[i].len);
    const int32_t id = core.lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t bid = byte_id(static_cast<uint8_t>(c));
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace agentkv
