// Internal tables shared by the tokenizer implementation files. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace agentkv {

// Token attributes as llama.cpp derives them from token types plus its text-based overrides.
enum TokenAttr : uint32_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

// Trie over the texts of special tokens, used to find which of them occur in a text at all.
class SpecialTrie {
 public:
  void insert(std::string_view text, int32_t id);
  // Appends (deduplicated by the caller) every id whose text occurs somewhere in `text`.
  void find_all(std::string_view text, std::vector<int32_t>& out) const;

 private:
  struct Node {
    int32_t id = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child node
};

// The BPE pre-tokenizers implemented (tokenizer.ggml.pre): smollm, qwen2 (= deepseek-r1-qwen),
// llama3 (llama-bpe and the other names of is_llama3_pre) and gpt-4o (= llama4, kanana2, talkie).
enum class BpePre { kSmollm, kQwen2, kLlama3, kGpt4o };

struct TokenizerCore {
  Tokenizer::Kind kind = Tokenizer::Kind::kBpe;
  BpePre pre = BpePre::kSmollm;
  // llama.cpp's per-pre-tokenizer passes: a pre-token that is a vocab entry is taken whole
  // (ignore_merges); decode() tidies spaces before punctuation (clean_up_spaces()).
  bool ignore_merges = false;
  bool clean_spaces = false;
  VocabData vocab;  // tokens / scores / types as loaded (empty tokens renamed like llama.cpp)
  std::vector<uint32_t> attrs;
  std::unordered_map<std::string_view, int32_t> token_to_id;  // views into vocab.tokens
  std::unordered_map<std::string, int32_t> bpe_ranks;         // key: see bpe_rank_key()
  std::vector<std::string> pieces;                            // token_to_piece(id, special=true), precomputed
  std::vector<int32_t> special_order;  // CONTROL|USER_DEFINED|UNKNOWN ids, longest text first
  std::vector<int32_t> special_rank;   // id -> position in special_order, -1 if not special
  SpecialTrie special_trie;
  std::vector<uint8_t> eog;  // per id
  int32_t eot = -1;

  int32_t lookup(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  int32_t bpe_rank(std::string_view left, std::string_view right) const;
};

// Both merge ranks and lookups use this key: 4 bytes of left length, then left, then right.
std::string bpe_rank_key(std::string_view left, std::string_view right);

// Pre-tokenize + merge one raw text fragment (no special tokens inside) and append the ids.
void bpe_encode_fragment(const TokenizerCore& core, std::string_view text, std::vector<int32_t>& out);
// prefix_space: prepend the SentencePiece dummy-prefix space (add_space_prefix after a special token).
void spm_encode_fragment(const TokenizerCore& core, std::string_view text, bool prefix_space,
                         std::vector<int32_t>& out);

// The pre-tokenizer `pre`: [begin, end) code point spans of `cps`.
std::vector<std::pair<size_t, size_t>> bpe_pretokenize(BpePre pre, const std::vector<uint32_t>& cps);

// llama.cpp's clean_up_tokenization_spaces passes over detokenized text (llama_vocab::detokenize),
// in place: drops the space before ? ! . , ; turns " ' " into "'"; drops the space before 's 'm 're 've.
void clean_up_spaces(std::string& text);

// Splits `text` at special tokens exactly like llama.cpp's tokenizer_st_partition.
struct Fragment {
  size_t offset, length;
  int32_t token;  // -1: raw text [offset, offset + length)
};
std::vector<Fragment> partition_special(const TokenizerCore& core, std::string_view text, bool parse_special);

}  // namespace agentkv
