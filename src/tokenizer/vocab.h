// Plain description of a tokenizer vocabulary, as stored in GGUF metadata (tokenizer.ggml.*).
// Kept independent of the GGUF reader so the tokenizer can be built from hand-made vocabularies in
// tests and fuzzers.
#pragma once

#include <cstdint>
#include <string>
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

}  // namespace agentkv
