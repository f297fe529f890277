// Text <-> token ids for the two GGUF tokenizer families we run:
//   * "gpt2"  : byte-level BPE with a regex pre-tokenizer (pre = "smollm", "qwen2", "llama-bpe"),
//   * "llama" : SentencePiece-style BPE over scores with <0xXX> byte fallback (Gemma 3).
// Behaviour follows llama.cpp (commit 0c1e570) token for token, including its handling of invalid
// UTF-8 and of special tokens; tests/data/tokenizer/*.golden.jsonl pin that down.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/status.h"

namespace agentkv {

struct TokenizerCore;  // internal tables, see tokenizer_core.h

class Tokenizer {
 public:
  enum class Kind { kBpe, kSpm };

  static Result<std::unique_ptr<Tokenizer>> create(VocabData vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_bos: prepend bos_id() (callers normally pass add_bos_default()).
  // parse_special: also recognise CONTROL/UNKNOWN token texts such as "<|im_start|>";
  // USER_DEFINED token texts are always recognised.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // encode()'s tokens when there are at most max_tokens of them, else nullopt: refused unread when
  // the text has more bytes than max_tokens tokens can cover (min_tokens), else encoding stops soon
  // after the count passes the limit, so text over a model's context costs about a context's worth
  // of tokenization, not the whole text's.
  std::optional<std::vector<int32_t>> encode_within(std::string_view text, bool add_bos, bool parse_special,
                                                    int64_t max_tokens) const;
  // A lower bound on the tokens of any text of `bytes` bytes (no token covers more bytes than the
  // longest token text); 0 for a vocabulary where some byte encodes to nothing.
  int64_t min_tokens(size_t bytes) const;

  // special: render CONTROL/UNKNOWN tokens as their text (otherwise they produce nothing).
  // As llama_detokenize: for llama-bpe, spaces before punctuation are cleaned (clean_up_spaces);
  // token_to_piece and StreamDecoder give the raw pieces.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;
  // Whether the text holds the text of a CONTROL or UNKNOWN token (what parse_special would turn
  // into a special id).
  bool has_special_text(std::string_view text) const;
  std::string token_to_piece(int32_t id, bool special) const;

  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t eot_id() const;         // -1 if none
  bool is_eog(int32_t id) const;  // end of generation: eos, eot and llama.cpp's EOG-by-text list
  std::vector<int32_t> eog_ids() const;
  int32_t n_vocab() const;
  bool add_bos_default() const;
  Kind kind() const;
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;           // as given in the vocab
  int32_t find_token(std::string_view text) const;  // -1 if not a token
  bool is_special(int32_t id) const;                // CONTROL or UNKNOWN after llama.cpp's overrides
  const std::string& chat_template() const;
  const std::string& architecture() const;

 private:
  Tokenizer();
  // Appends text's tokens to out, stopping (false) once out holds more than `limit`.
  bool encode_into(std::string_view text, bool add_bos, bool parse_special, size_t limit,
                   std::vector<int32_t>& out) const;
  std::unique_ptr<TokenizerCore> core_;
  size_t max_token_bytes_ = 0;  // the most bytes one token covers; 0: no bound (see min_tokens)
};

// Turns a stream of generated ids into text without ever emitting a partial UTF-8 character:
// incomplete trailing bytes are held back until the next token completes them (or flush()).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(tok), special_(special) {}
  std::string push(int32_t id);
  std::string flush();  // whatever is held back, even if incomplete

 private:
  const Tokenizer& tok_;
  bool special_;
  std::string pending_;
};

}  // namespace agentkv
