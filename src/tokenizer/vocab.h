// Plain description of a tokenizer vocabulary, as stored in GGUF metadata (tokenizer.ggml.*).
// Kept independent of the GGUF reader so the tokenizer can be built from hand-made vocabularies in
// tests and fuzzers.
#pragma once

#include <cstdint>
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct VocabData {
  std::string model;         // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;           // tokenizer.ggml.pre
  std::string architecture;  // general.architecture (used to pick a chat format)
  std::vector<std::string> tokens;
  std::vector<float> scores;                                 // may be empty (all 0)
  std::vector<int32_t> token_types;                          // may be empty (all NORMAL)
  std::vector<std::string> merges;                           // "left right", rank = index; BPE only
  int32_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;  // -1 if absent
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  std::string chat_template;  // tokenizer.chat_template, may be empty
};

// tokenizer.ggml.pre names that llama.cpp (src/llama-vocab.cpp) maps to its Llama 3 pre-tokenizer,
// LLAMA_VOCAB_PRE_TYPE_LLAMA3 (one pattern, ignore_merges, clean_spaces, add_bos by default).
inline bool is_llama3_pre(std::string_view pre) {
  static constexpr std::string_view kNames[] = {"llama3",   "llama-v3",  "llama-bpe",
                                                "falcon3",  "falcon-h1", "pixtral",
                                                "midm-2.0", "lfm2",      "jina-v5-nano"};
  return std::find(std::begin(kNames), std::end(kNames), pre) != std::end(kNames);
}

}  // namespace agentkv
