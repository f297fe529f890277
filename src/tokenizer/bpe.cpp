// Byte-level BPE (tokenizer.ggml.model = "gpt2") with the "smollm", "qwen2", "llama-bpe" or "gpt-4o"
// pre-tokenizer.
//
// smollm applies two patterns in sequence, each to the pieces left by the previous one, keeping
// matched and unmatched spans (llama.cpp's unicode_regex_split):
//   1. \p{N}  -- every number code point becomes a piece of its own;
//   2. 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// qwen2 (also "deepseek-r1-qwen") is one pattern, Qwen2's tokenizer.json regex:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// llama-bpe (Llama 3.x; also llama3, llama-v3, falcon3, ...: see is_llama3_pre) is the same pattern
// with \p{N}{1,3} for \p{N}, so one matcher serves both. llama.cpp also sets ignore_merges for it: a
// pre-token that is itself a vocab entry becomes that token without any merging (merge_word).
// gpt-4o (also llama4, kanana2, talkie) is llama.cpp's adaptation of the o200k pattern:
//   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|
//   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...)?|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// which llama.cpp has no custom matcher for: see pattern_split for what its std::regex fallback makes of it.
// All are hand-written matchers over code points: std::regex is slow and not Unicode aware.
#include <algorithm>
#include <cctype>

#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer_core.h"
#include "tokenizer/unicode.h"

namespace agentkv {

std::string bpe_rank_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(4 + left.size() + right.size());
  const auto n = static_cast<uint32_t>(left.size());
  key.append(reinterpret_cast<const char*>(&n), sizeof(n));
  key.append(left);
  key.append(right);
  return key;
}

int32_t TokenizerCore::bpe_rank(std::string_view left, std::string_view right) const {
  auto it = bpe_ranks.find(bpe_rank_key(left, right));
  return it == bpe_ranks.end() ? -1 : it->second;
}

namespace {

// Character classes as seen by the GPT-2 matcher. Positions outside the current piece are kNone,
// which (unlike every real code point) belongs to no class at all.
enum class Cls : uint8_t { kNone, kLetter, kNumber, kSpace, kOther };

Cls classify(uint32_t cp) {
  if (unicode::is_whitespace(cp)) return Cls::kSpace;
  if (unicode::is_letter(cp)) return Cls::kLetter;
  if (unicode::is_number(cp)) return Cls::kNumber;
  return Cls::kOther;
}

void gpt2_split(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                std::vector<std::pair<size_t, size_t>>& out) {
  auto cls_at = [&](size_t p) { return p < end ? classify(cps[p]) : Cls::kNone; };
  auto emit = [&](size_t from, size_t to) {
    if (to > from) out.emplace_back(from, to);
  };
  size_t pos = begin;
  while (pos < end) {
    const uint32_t cp = cps[pos];
    // Contractions, case-sensitive, only inside the piece.
    if (cp == '\'' && pos + 1 < end) {
      const uint32_t c1 = cps[pos + 1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(pos, pos + 2);
        pos += 2;
        continue;
      }
      if (pos + 2 < end) {
        const uint32_t c2 = cps[pos + 2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(pos, pos + 3);
          pos += 3;
          continue;
        }
      }
    }
    // " ?X+" for X in {letter, number, other}: an optional single ASCII space joins the run.
    const size_t run_start = pos + (cp == ' ' ? 1 : 0);
    const Cls head = cls_at(run_start);
    if (head == Cls::kLetter || head == Cls::kNumber || head == Cls::kOther) {
      size_t p = run_start;
      while (cls_at(p) == head) ++p;
      emit(pos, p);
      pos = p;
      continue;
    }
    size_t n_space = 0;
    while (cls_at(pos + n_space) == Cls::kSpace) ++n_space;
    if (n_space > 1 && pos + n_space < end) {
      // \s+(?!\S): leave the last whitespace to prefix the following token.
      emit(pos, pos + n_space - 1);
      pos += n_space - 1;
      continue;
    }
    if (n_space > 0) {
      emit(pos, pos + n_space);
      pos += n_space;
      continue;
    }
    emit(pos, pos + 1);  // unreachable for real code points; kept for safety
    pos += 1;
  }
}

// How the qwen2, llama-bpe and gpt-4o patterns differ; the rest of them is the same.
struct Pattern {
  size_t max_digits;  // the N of \p{N}{1,N}: 1 for qwen2, 3 for llama-bpe and gpt-4o
  bool cased_words;  // gpt-4o: letter runs split by case, contractions only after them, "/" after punctuation
};

// The qwen2 pattern above (or a variant, see Pattern), alternative by alternative, leftmost first, at
// each position of [0, n). gpt-4o's letter alternatives, as llama.cpp runs them (std::regex over text
// where every non-ASCII letter is one placeholder byte, so it is both [^a-z] and [^A-Z]):
//   [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C?   (U: a letter not a-z, L: a letter not A-Z,
//   C: a contraction as above), then " ?[^\s\p{L}\p{N}]+[\r\n/]*" for the punctuation alternative.
void pattern_split(const std::vector<uint32_t>& cps, const Pattern& pattern,
                   std::vector<std::pair<size_t, size_t>>& out) {
  const size_t end = cps.size();
  auto cls_at = [&](size_t p) { return p < end ? classify(cps[p]) : Cls::kNone; };
  auto is_crlf = [&](size_t p) { return p < end && (cps[p] == '\r' || cps[p] == '\n'); };
  auto lower = [&](size_t p) { return p < end && cps[p] < 128 ? uint32_t(std::tolower(int(cps[p]))) : 0u; };
  auto ascii_in = [&](size_t p, char lo, char hi) {
    return cps[p] >= uint32_t(lo) && cps[p] <= uint32_t(hi);
  };
  auto cased_u = [&](size_t p) { return cls_at(p) == Cls::kLetter && !ascii_in(p, 'a', 'z'); };
  auto cased_l = [&](size_t p) { return cls_at(p) == Cls::kLetter && !ascii_in(p, 'A', 'Z'); };
  // (?i:'s|'t|'re|'ve|'m|'ll|'d) at p: its length, or 0.
  auto contraction = [&](size_t p) -> size_t {
    if (p >= end || cps[p] != '\'') return 0;
    const uint32_t c1 = lower(p + 1), c2 = lower(p + 2);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    return (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') ? 3 : 0;
  };
  size_t pos = 0;
  auto emit_to = [&](size_t to) {
    out.emplace_back(pos, to);
    pos = to;
  };
  while (pos < end) {
    const uint32_t cp = cps[pos];
    const Cls cls = cls_at(pos);
    if (!pattern.cased_words) {
      if (const size_t n = contraction(pos); n > 0) {
        emit_to(pos + n);
        continue;
      }
    }
    // [^\r\n\p{L}\p{N}]? before a letter run
    const bool lead =
        cls != Cls::kLetter && cls != Cls::kNumber && !is_crlf(pos) && cls_at(pos + 1) == Cls::kLetter;
    const size_t word = pos + (lead ? 1 : 0);
    if (cls_at(word) == Cls::kLetter && !pattern.cased_words) {  // \p{L}+
      size_t p = word + 1;
      while (cls_at(p) == Cls::kLetter) ++p;
      emit_to(p);
      continue;
    }
    if (cls_at(word) == Cls::kLetter) {
      size_t u_end = word;  // U* takes the whole run of U first
      while (cased_u(u_end)) ++u_end;
      size_t p = u_end;
      if (cased_l(u_end)) {
        while (cased_l(p)) ++p;
      } else {
        // Backtracking: L+ can start only at the run's last letter that is both U and L (then it is
        // that one letter); with none, U+L*C? takes the run of U alone.
        for (size_t k = u_end; k > word; --k) {
          if (cased_l(k - 1)) {
            p = k;
            break;
          }
        }
      }
      emit_to(p + contraction(p));
      continue;
    }
    // \p{N}{1,max_digits}
    if (cls == Cls::kNumber) {
      size_t p = pos + 1;
      while (p - pos < pattern.max_digits && cls_at(p) == Cls::kNumber) ++p;
      emit_to(p);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*" (gpt-4o: [\r\n/]*)
    const size_t run = pos + (cp == ' ' ? 1 : 0);
    if (cls_at(run) == Cls::kOther) {
      size_t p = run;
      while (cls_at(p) == Cls::kOther) ++p;
      while (is_crlf(p) || (pattern.cased_words && p < end && cps[p] == '/')) ++p;
      emit_to(p);
      continue;
    }
    size_t n_space = 0, after_last_crlf = 0;
    while (cls_at(pos + n_space) == Cls::kSpace) {
      if (is_crlf(pos + n_space)) after_last_crlf = pos + n_space + 1;
      ++n_space;
    }
    if (after_last_crlf > 0) {  // \s*[\r\n]+
      emit_to(after_last_crlf);
      continue;
    }
    if (n_space > 1 && pos + n_space < end) {  // \s+(?!\S): the last space joins what follows
      emit_to(pos + n_space - 1);
      continue;
    }
    emit_to(pos + std::max<size_t>(n_space, 1));  // \s+ (or a lone character nothing matched)
  }
}

struct Bigram {
  int left, right;
  int32_t rank;
  size_t size;
};

struct BigramWorse {
  // Lowest rank first; equal ranks: leftmost first.
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

void merge_word(const TokenizerCore& core, std::string_view word, std::vector<int32_t>& out) {
  if (core.ignore_merges) {
    if (const int32_t whole = core.lookup(word); whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<MergeSymbol> syms = split_symbols(word);
  run_merges<Bigram, BigramWorse>(syms, [&](int l, int r, auto push) {
    const int32_t rank =
        core.bpe_rank(word.substr(syms[l].off, syms[l].len), word.substr(syms[r].off, syms[r].len));
    if (rank >= 0) push(Bigram{l, r, rank, syms[l].len + syms[r].len});
  });
  // A symbol that is not in the vocab: llama.cpp looks up each byte of the *encoded* text as a
  // one-byte token and silently drops bytes that have none.
  emit_symbols(core, word, syms, out, [&](uint8_t b) {
    const char c = static_cast<char>(b);
    return core.lookup(std::string_view(&c, 1));
  });
}

void smollm_split(const std::vector<uint32_t>& cps, std::vector<std::pair<size_t, size_t>>& out) {
  size_t run = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    if (i == cps.size() || unicode::is_number(cps[i])) {
      if (i > run) gpt2_split(cps, run, i, out);
      if (i < cps.size()) out.emplace_back(i, i + 1);
      run = i + 1;
    }
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> bpe_pretokenize(BpePre pre, const std::vector<uint32_t>& cps) {
  std::vector<std::pair<size_t, size_t>> out;
  switch (pre) {
    case BpePre::kSmollm:
      smollm_split(cps, out);
      break;
    case BpePre::kQwen2:
      pattern_split(cps, Pattern{1, false}, out);
      break;
    case BpePre::kLlama3:
      pattern_split(cps, Pattern{3, false}, out);
      break;
    case BpePre::kGpt4o:
      pattern_split(cps, Pattern{3, true}, out);
      break;
  }
  return out;
}

void bpe_encode_fragment(const TokenizerCore& core, std::string_view text, std::vector<int32_t>& out) {
  const std::vector<uint32_t> cps = unicode::decode(text);
  std::string word;
  for (const auto& [b, e] : bpe_pretokenize(core.pre, cps)) {
    // Re-encoding the decoded code points is deliberate: invalid bytes become U+FFFD (EF BF BD)
    // and overlong forms are normalised, exactly as llama.cpp feeds them to the byte map.
    const std::string utf8 = unicode::to_utf8(cps, b, e);
    word.clear();
    for (char c : utf8) word += unicode::byte_to_utf8(static_cast<uint8_t>(c));
    merge_word(core, word, out);
  }
}

}  // namespace agentkv
