#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tokenizer/tokenizer_core.h"
#include "tokenizer/unicode.h"

namespace agentkv {

namespace {

// Token texts llama.cpp (0c1e570, llama-vocab.cpp) recognises by name. EOT/EOM/FIM tokens are
// picked when the GGUF does not name them, and forced to CONTROL; every token in kEogTexts ends
// generation.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                             "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kFimOtherTexts[] = {"<|fim_prefix|>",
                                               "<fim-prefix>",
                                               "<fim_prefix>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81"
                                               "begin\xEF\xBD\x9C>",
                                               "<PRE>",
                                               "\xE2\x96\x81<PRE>",
                                               "<|code_prefix|>",
                                               "<|prefix|>",
                                               "<|fim_suffix|>",
                                               "<fim-suffix>",
                                               "<fim_suffix>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                               "<SUF>",
                                               "\xE2\x96\x81<SUF>",
                                               "<|code_suffix|>",
                                               "<|suffix|>",
                                               "<|fim_middle|>",
                                               "<fim-middle>",
                                               "<fim_middle>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81"
                                               "end\xEF\xBD\x9C>",
                                               "<MID>",
                                               "\xE2\x96\x81<MID>",
                                               "<|code_middle|>",
                                               "<|middle|>"};
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "[e~["};

uint32_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return 0;
  }
}

// llama.cpp's llama_decode_text: map each code point back through the GPT-2 byte table; code
// points outside it are rendered as a visible marker rather than dropped.
std::string decode_bpe_text(const std::string& text) {
  std::string out;
  for (uint32_t cp : unicode::decode(text)) {
    const int b = unicode::codepoint_to_byte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cp);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out += text + "]";
  }
  return out;
}

std::string unescape_spm(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

char byte_of_token(const std::string& text) {
  // "<0xAB>" -> 0xAB, parsed as leniently as llama.cpp's strtol on characters 3..4.
  const std::string hex = text.size() > 3 ? text.substr(3, 2) : std::string();
  return static_cast<char>(std::strtol(hex.c_str(), nullptr, 16));
}

// A byte offset where the pre-tokenizer always splits and UTF-8 decoding is unchanged, so that
// encoding [0, i) and [i, end) on their own gives the tokens of the whole. The byte before must be
// ASCII (no character straddles the cut) and, but for smollm's digits, not whitespace: how a run of
// whitespace splits depends on what follows it (\s+(?!\S)). Then every pattern splits before " x"
// (x an ASCII letter: a letter run with its one leading character starts there) and before an ASCII
// digit (smollm makes every number a piece first), except inside a \p{N}{1,3} count (llama-bpe, gpt-4o).
bool bpe_safe_cut(BpePre pre, std::string_view s, size_t i) {
  if (i == 0 || i + 1 >= s.size() || static_cast<uint8_t>(s[i - 1]) >= 0x80) return false;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const bool after_space = unicode::is_whitespace(static_cast<uint8_t>(s[i - 1]));
  if (digit(s[i])) {
    const bool counts_digits = pre == BpePre::kLlama3 || pre == BpePre::kGpt4o;
    return pre == BpePre::kSmollm || (!after_space && !(counts_digits && digit(s[i - 1])));
  }
  const char next = s[i + 1];
  return s[i] == ' ' && ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z')) && !after_space;
}

template <size_t N>
bool text_in(std::string_view text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

}  // namespace

Tokenizer::Tokenizer() : core_(std::make_unique<TokenizerCore>()) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(VocabData vocab) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  TokenizerCore& c = *tok->core_;
  if (vocab.model == "gpt2") {
    c.kind = Kind::kBpe;
    // smollm, qwen2 (deepseek-r1-qwen is the same regex) and gpt-4o go without llama.cpp's
    // ignore_merges and clean_spaces passes; its Llama 3 pre-tokenizer has both. Others are refused.
    if (vocab.pre == "smollm") {
      c.pre = BpePre::kSmollm;
    } else if (vocab.pre == "qwen2" || vocab.pre == "deepseek-r1-qwen") {
      c.pre = BpePre::kQwen2;
    } else if (is_llama3_pre(vocab.pre)) {
      c.pre = BpePre::kLlama3;
      c.ignore_merges = true;
      c.clean_spaces = true;
    } else if (vocab.pre == "gpt-4o" || vocab.pre == "llama4" || vocab.pre == "kanana2" ||
               vocab.pre == "talkie") {
      c.pre = BpePre::kGpt4o;
    } else {
      return make_error("tokenizer: unsupported BPE pre-tokenizer '" + vocab.pre +
                        "' (supported: smollm, qwen2, deepseek-r1-qwen, llama-bpe and its other names such "
                        "as llama3, gpt-4o)");
    }
  } else if (vocab.model == "llama") {
    c.kind = Kind::kSpm;
  } else {
    return make_error("tokenizer: unsupported tokenizer model '" + vocab.model + "'");
  }
  const size_t n = vocab.tokens.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) return make_error("tokenizer: empty vocabulary");
  if (!vocab.scores.empty() && vocab.scores.size() < n) {
    return make_error("tokenizer: fewer scores than tokens");
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() < n) {
    return make_error("tokenizer: fewer token types than tokens");
  }
  for (int32_t* id : {&vocab.bos, &vocab.eos, &vocab.eot, &vocab.unk, &vocab.pad}) {
    if (*id >= static_cast<int64_t>(n)) *id = -1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (vocab.tokens[i].empty()) vocab.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  c.vocab = std::move(vocab);
  const auto& tokens = c.vocab.tokens;

  c.token_to_id.reserve(n * 2);
  c.attrs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    c.token_to_id[tokens[i]] = static_cast<int32_t>(i);  // later duplicates win, as in llama.cpp
    c.attrs[i] = c.vocab.token_types.empty() ? kAttrNormal : attr_from_type(c.vocab.token_types[i]);
  }
  if (c.kind == Kind::kBpe) {
    c.bpe_ranks.reserve(c.vocab.merges.size() * 2);
    for (size_t i = 0; i < c.vocab.merges.size(); ++i) {
      const std::string& m = c.vocab.merges[i];
      const size_t sp = m.find(' ', 1);
      const std::string_view mv(m);
      const std::string key =
          sp == std::string::npos ? bpe_rank_key("", "") : bpe_rank_key(mv.substr(0, sp), mv.substr(sp + 1));
      c.bpe_ranks.emplace(key, static_cast<int32_t>(i));  // first occurrence wins
    }
  }

  // Text-based detection of EOT/EOM/FIM and EOG tokens (see the lists above). llama.cpp takes the
  // first match in hash-map order when several texts match; we take the lowest id.
  auto force_control = [&](int32_t id) { c.attrs[id] |= kAttrControl; };
  auto detect = [&](int32_t current, auto& list) -> int32_t {
    if (current >= 0) return current;
    for (size_t i = 0; i < n; ++i) {
      if (text_in(tokens[i], list)) {
        force_control(static_cast<int32_t>(i));
        return static_cast<int32_t>(i);
      }
    }
    return -1;
  };
  c.eot = detect(c.vocab.eot, kEotTexts);
  const int32_t eom = detect(-1, kEomTexts);
  const int32_t fim_pad = detect(-1, kFimPadTexts);
  const int32_t fim_rep = detect(-1, kFimRepTexts);
  const int32_t fim_sep = detect(-1, kFimSepTexts);
  for (size_t i = 0; i < n; ++i) {
    // FIM prefix/suffix/middle: each kind takes one token, but none of our vocabularies has two.
    if (text_in(tokens[i], kFimOtherTexts)) force_control(static_cast<int32_t>(i));
  }
  c.eog.assign(n, 0);
  for (int32_t id : {fim_pad, fim_rep, fim_sep, c.vocab.eos, c.eot, eom}) {
    if (id >= 0) c.eog[id] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (text_in(tokens[i], kEogTexts)) {
      c.eog[i] = 1;
      force_control(static_cast<int32_t>(i));
    }
  }

  // Special-token order: std::sort by descending length over ascending ids, the same call
  // llama.cpp makes, so ties between equal-length tokens resolve identically with libstdc++.
  for (size_t i = 0; i < n; ++i) {
    if (c.attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      c.special_order.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(c.special_order.begin(), c.special_order.end(),
            [&](int32_t a, int32_t b) { return tokens[a].size() > tokens[b].size(); });
  c.special_rank.assign(n, -1);
  for (size_t r = 0; r < c.special_order.size(); ++r) {
    c.special_rank[c.special_order[r]] = static_cast<int32_t>(r);
    c.special_trie.insert(tokens[c.special_order[r]], c.special_order[r]);
  }

  // Pieces for special=true; special=false only adds the CONTROL/UNKNOWN filter on top.
  c.pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = c.attrs[i];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      c.pieces[i] = tokens[i];
    } else if (a & kAttrNormal) {
      c.pieces[i] = c.kind == Kind::kBpe ? decode_bpe_text(tokens[i]) : unescape_spm(tokens[i]);
    } else if (a & kAttrByte) {
      c.pieces[i] = std::string(1, byte_of_token(tokens[i]));
    }  // UNUSED / UNDEFINED tokens render as nothing
  }
  // min_tokens' bound holds when every byte has a token of its own or a fallback (so no text
  // vanishes): a token then covers at most its text's bytes (byte-level and "\xE2\x96\x81" escapes
  // only lengthen the text) and <unk> at most one 4-byte character.
  size_t longest = 4;
  for (const std::string& t : tokens) longest = std::max(longest, t.size());
  bool every_byte = true;
  for (int b = 0; b < 256 && every_byte; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    std::vector<int32_t> ids;
    if (c.kind == Kind::kSpm) spm_encode_fragment(c, std::string_view(reinterpret_cast<const char*>(&byte), 1), false, ids);
    every_byte = c.kind == Kind::kBpe ? c.lookup(unicode::byte_to_utf8(byte)) >= 0 : !ids.empty();
  }
  tok->max_token_bytes_ = every_byte ? longest : 0;
  return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  encode_into(text, add_bos, parse_special, std::numeric_limits<size_t>::max(), out);
  return out;
}

std::optional<std::vector<int32_t>> Tokenizer::encode_within(std::string_view text, bool add_bos, bool parse_special,
                                                             int64_t max_tokens) const {
  if (max_tokens < 0 || min_tokens(text.size()) > max_tokens) return std::nullopt;
  std::vector<int32_t> out;
  if (!encode_into(text, add_bos, parse_special, size_t(max_tokens), out)) return std::nullopt;
  return out;
}

int64_t Tokenizer::min_tokens(size_t bytes) const {
  if (max_token_bytes_ == 0) return 0;
  return int64_t((bytes + max_token_bytes_ - 1) / max_token_bytes_);
}

bool Tokenizer::encode_into(std::string_view text, bool add_bos, bool parse_special, size_t limit,
                            std::vector<int32_t>& out) const {
  // With a limit, long BPE fragments are encoded in pieces of about this many bytes, cut where the
  // result is the same (bpe_safe_cut), and the count checked after each.
  constexpr size_t kPieceBytes = 4096;
  const TokenizerCore& c = *core_;
  const bool bounded = limit != std::numeric_limits<size_t>::max();
  if (add_bos && c.vocab.bos >= 0) out.push_back(c.vocab.bos);
  bool prev_special = true;  // SentencePiece dummy prefix goes before the first raw fragment
  for (const Fragment& f : partition_special(c, text, parse_special)) {
    if (out.size() > limit) return false;
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.offset, f.length);
    if (c.kind == Kind::kBpe) {
      size_t done = 0;
      while (bounded && raw.size() - done > 2 * kPieceBytes && out.size() <= limit) {
        size_t cut = done + kPieceBytes;
        while (cut < raw.size() && !bpe_safe_cut(c.pre, raw, cut)) ++cut;
        if (cut >= raw.size()) break;
        bpe_encode_fragment(c, raw.substr(done, cut - done), out);
        done = cut;
      }
      if (out.size() > limit) return false;
      bpe_encode_fragment(c, raw.substr(done), out);
    } else {
      spm_encode_fragment(c, raw, c.vocab.add_space_prefix && prev_special, out);
    }
    prev_special = false;
  }
  return out.size() <= limit;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const TokenizerCore& c = *core_;
  if (id < 0 || id >= n_vocab()) return {};
  if (!special && (c.attrs[id] & (kAttrUnknown | kAttrControl))) return {};
  return c.pieces[id];
}

bool Tokenizer::has_special_text(std::string_view text) const {
  for (const Fragment& f : partition_special(*core_, text, true))
    if (f.token >= 0 && (core_->attrs[f.token] & (kAttrControl | kAttrUnknown))) return true;
  return false;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  bool strip_space = core_->vocab.add_space_prefix;  // undo the dummy prefix of the first token
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  if (core_->clean_spaces) clean_up_spaces(out);
  return out;
}

void clean_up_spaces(std::string& text) {
  // Three passes as in llama_vocab::impl::detokenize, each over the previous one's output, always
  // keeping the first character. A rule sees in[i] after a space; dropping that space pops what the
  // pass wrote last, which is always in[i - 1].
  enum class Drop { kNone, kSpaceBefore, kSpacesAround };
  auto pass = [&text](auto rule) {
    std::string in;
    in.swap(text);
    for (size_t i = 0; i < in.size(); ++i) {
      const Drop d = i > 0 && in[i - 1] == ' ' ? rule(in, i) : Drop::kNone;
      if (d != Drop::kNone) text.pop_back();
      text += in[i];
      // The space after is skipped too; llama.cpp overwrites it with NUL, so it is no "space before".
      if (d == Drop::kSpacesAround) in[++i] = '\0';
    }
  };
  pass([](const std::string& in, size_t i) {
    const char x = in[i];
    return x == '?' || x == '!' || x == '.' || x == ',' ? Drop::kSpaceBefore : Drop::kNone;
  });
  pass([](const std::string& in, size_t i) {
    return in[i] == '\'' && i + 1 < in.size() && in[i + 1] == ' ' ? Drop::kSpacesAround : Drop::kNone;
  });
  pass([](const std::string& in, size_t i) {
    if (in[i] != '\'' || i + 1 >= in.size()) return Drop::kNone;
    const char x1 = in[i + 1];
    if (x1 == 's' || x1 == 'm') return Drop::kSpaceBefore;  // " 's", " 'm"; " 't", " 'd", " 'll" stay
    const bool re_ve = i + 2 < in.size() && (x1 == 'r' || x1 == 'v') && in[i + 2] == 'e';
    return re_ve ? Drop::kSpaceBefore : Drop::kNone;
  });
}

int32_t Tokenizer::bos_id() const { return core_->vocab.bos; }
int32_t Tokenizer::eos_id() const { return core_->vocab.eos; }
int32_t Tokenizer::eot_id() const { return core_->eot; }
bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && core_->eog[id]; }
std::vector<int32_t> Tokenizer::eog_ids() const {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n_vocab(); ++i) {
    if (core_->eog[i]) ids.push_back(i);
  }
  return ids;
}
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(core_->vocab.tokens.size()); }
bool Tokenizer::add_bos_default() const { return core_->vocab.add_bos; }
Tokenizer::Kind Tokenizer::kind() const { return core_->kind; }
const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < n_vocab() ? core_->vocab.tokens[id] : kEmpty;
}
TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return TokenType::kUndefined;
  return core_->vocab.token_types.empty() ? TokenType::kNormal
                                          : static_cast<TokenType>(core_->vocab.token_types[id]);
}
int32_t Tokenizer::find_token(std::string_view text) const { return core_->lookup(text); }
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < n_vocab() && (core_->attrs[id] & (kAttrControl | kAttrUnknown));
}
const std::string& Tokenizer::chat_template() const { return core_->vocab.chat_template; }
const std::string& Tokenizer::architecture() const { return core_->vocab.architecture; }

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id, special_);
  const size_t hold = unicode::incomplete_utf8_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace agentkv
