// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): spaces become U+2581, then adjacent
// symbols are merged greedily by the score of the merged token (highest first, leftmost on ties);
// symbols that are not tokens fall back to <0xXX> byte tokens.
#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_core.h"

namespace agentkv {

namespace {

struct SpmBigram {
  int left, right;
  float score;
  size_t size;
};

struct SpmBigramWorse {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

int32_t byte_token(const TokenizerCore& core, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  int32_t id = core.lookup(std::string_view(buf, 6));
  if (id < 0) id = core.lookup(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  return id;
}

}  // namespace

void spm_encode_fragment(const TokenizerCore& core, std::string_view raw, bool prefix_space,
                         std::vector<int32_t>& out) {
  std::string text;
  text.reserve(raw.size() + 3);
  if (prefix_space) text.push_back(' ');
  for (char c : raw) {
    if (c == ' ') {
      text += "\xE2\x96\x81";
    } else {
      text.push_back(c);
    }
  }

  const std::string_view tv(text);
  std::vector<MergeSymbol> syms = split_symbols(tv);
  run_merges<SpmBigram, SpmBigramWorse>(syms, [&](int l, int r, auto push) {
    const size_t size = syms[l].len + syms[r].len;
    const int32_t id = core.lookup(tv.substr(syms[l].off, size));
    if (id < 0) return;
    push(SpmBigram{l, r, core.vocab.scores.empty() ? 0.0f : core.vocab.scores[id], size});
  });
  // Every merged symbol is a token by construction, so only single characters that are not tokens
  // need the byte fallback. (llama.cpp's rev_merge resegmentation never fires for that reason.)
  emit_symbols(core, tv, syms, out, [&](uint8_t b) { return byte_token(core, b); });
}

}  // namespace agentkv
