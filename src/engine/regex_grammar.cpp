// JSON string characters and JSON Schema `pattern` regexes as grammar rules (see regex_grammar.h).
//
// The regex subset (ECMA 262, no flags): literals (UTF-8 included), escapes \d \D \w \W \s \S, \t \n
// \r \f \v \0, \xHH, \uXXXX, escaped punctuation; classes [...] and [^...] of ASCII characters and
// ranges (a non-ASCII member is refused); `.`; groups (...), (?:...), (?<name>...); |; the
// quantifiers ? * + {m} {m,} {m,n}, greedy or lazy (the same strings); ^ at the start and $ at the
// end of a top-level alternative. Refused: backreferences, lookaround, \b \B, \p{...}, anchors
// anywhere else. Also refused, to keep the matcher's work per byte small (its stacks are expanded
// along every way through the empty string): a repeat other than ? of something that can match the
// empty string (unbounded, it would be a left-recursive rule), two alternatives of one group that
// both can, and nested repeats whose finite upper bounds multiply past max_repeat
// ((a{1,20}){1,20}); a ? of something that can match the empty string is dropped (same strings).
//
// Where this generates fewer strings than the regex matches: \s is ASCII whitespace only (the regex
// also matches U+00A0, U+2028, U+3000 and a few more), \S is ASCII non-space only, and a negated class
// that holds either takes no non-ASCII characters; `.` and other negated classes take every
// non-ASCII character (`.` all but U+2028/U+2029).
#include "engine/regex_grammar.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace agentkv {

using RegexItem = GrammarBuilder::Item;
using RegexSeq = GrammarBuilder::Seq;

namespace {

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int c = lo; c <= hi; ++c) s.set(size_t(c));
  return s;
}

ByteSet bytes_of(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.set(uint8_t(c));
  return s;
}

ByteSet hex_digits() { return byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F'); }

}  // namespace

RegexItem JsonStringChars::any() {
  if (any_ < 0) {
    const ByteSet raw = byte_range(0x20, 0x7F) & ~bytes_of("\"\\");
    const ByteSet hex = hex_digits();
    std::vector<RegexSeq> alts;
    alts.push_back({GrammarBuilder::bytes(raw)});
    alts.push_back({GrammarBuilder::byte('\\'), GrammarBuilder::bytes(bytes_of("\"\\/bfnrt"))});
    // \uXXXX outside D800-DFFF, and a surrogate only as a high (D800-DBFF) + low (DC00-DFFF) pair:
    // a lone surrogate is not a character (parse_json refuses it).
    const RegexItem u = GrammarBuilder::byte('u'), esc = GrammarBuilder::byte('\\'), h = GrammarBuilder::bytes(hex);
    const RegexItem d = GrammarBuilder::bytes(bytes_of("dD"));
    alts.push_back({esc, u, GrammarBuilder::bytes(hex & ~bytes_of("dD")), h, h, h});
    alts.push_back({esc, u, d, GrammarBuilder::range('0', '7'), h, h});
    alts.push_back({esc, u, d, GrammarBuilder::bytes(bytes_of("89abAB")), h, h, esc, u, d,
                    GrammarBuilder::bytes(byte_range('c', 'f') | byte_range('C', 'F')), h, h});
    alts.push_back({GrammarBuilder::ref(multibyte(CharSet::NonAscii::kAll))});
    any_ = b_.rule("json-char", std::move(alts));
  }
  return GrammarBuilder::ref(uint32_t(any_));
}

RegexItem JsonStringChars::any_star() {
  if (any_star_ < 0) any_star_ = b_.star(any());
  return GrammarBuilder::ref(uint32_t(any_star_));
}

// Valid UTF-8 sequences of 2-4 bytes (no overlongs, no surrogates, nothing over U+10FFFF).
uint32_t JsonStringChars::multibyte(CharSet::NonAscii which) {
  const bool all = which == CharSet::NonAscii::kAll;
  int64_t& cached = all ? multibyte_all_ : multibyte_no_line_sep_;
  if (cached >= 0) return uint32_t(cached);
  auto r = GrammarBuilder::range;
  const RegexItem cont = r(0x80, 0xBF);
  std::vector<RegexSeq> alts = {
      {r(0xC2, 0xDF), cont},
      {GrammarBuilder::byte(0xE0), r(0xA0, 0xBF), cont},
      {r(0xEE, 0xEF), cont, cont},
      {GrammarBuilder::byte(0xED), r(0x80, 0x9F), cont},
      {GrammarBuilder::byte(0xF0), r(0x90, 0xBF), cont, cont},
      {r(0xF1, 0xF3), cont, cont, cont},
      {GrammarBuilder::byte(0xF4), r(0x80, 0x8F), cont, cont},
  };
  if (all) {
    alts.push_back({r(0xE1, 0xEC), cont, cont});
  } else {  // U+2028 / U+2029 are E2 80 A8 / E2 80 A9
    alts.push_back({GrammarBuilder::byte(0xE1), cont, cont});
    alts.push_back({r(0xE3, 0xEC), cont, cont});
    alts.push_back({GrammarBuilder::byte(0xE2), r(0x81, 0xBF), cont});
    alts.push_back({GrammarBuilder::byte(0xE2), GrammarBuilder::byte(0x80),
                    GrammarBuilder::bytes(byte_range(0x80, 0xA7) | byte_range(0xAA, 0xBF))});
  }
  cached = b_.rule(all ? "utf8-multibyte" : "utf8-multibyte-no-line-sep", std::move(alts));
  return uint32_t(cached);
}

RegexItem JsonStringChars::of(const CharSet& set) {
  ByteSet raw;
  for (int c = 0x20; c < 0x80; ++c)
    if (set.ascii.test(size_t(c)) && c != '"' && c != '\\') raw.set(size_t(c));
  const bool only_raw = set.non_ascii == CharSet::NonAscii::kNone && !set.ascii.test('"') &&
                        !set.ascii.test('\\') && (set.ascii & std::bitset<128>(0xFFFFFFFFull)).none();
  if (only_raw) return GrammarBuilder::bytes(raw);

  const std::string key = set.ascii.to_string() + char('0' + int(set.non_ascii));
  if (const auto it = sets_.find(key); it != sets_.end()) return GrammarBuilder::ref(it->second);
  std::vector<RegexSeq> alts;
  if (raw.any()) alts.push_back({GrammarBuilder::bytes(raw)});
  for (const char c : {'"', '\\'})
    if (set.ascii.test(size_t(c))) alts.push_back({GrammarBuilder::byte('\\'), GrammarBuilder::byte(uint8_t(c))});
  // Control characters: the short escape where JSON has one, else \u00XX (hex digits in either case).
  static constexpr struct { char c, esc; } kShort[] = {{'\b', 'b'}, {'\t', 't'}, {'\n', 'n'}, {'\f', 'f'}, {'\r', 'r'}};
  ByteSet low[2];  // the last hex digit of \u000X and \u001X
  for (int c = 0; c < 0x20; ++c) {
    if (!set.ascii.test(size_t(c))) continue;
    const auto* s = std::find_if(std::begin(kShort), std::end(kShort), [&](const auto& e) { return e.c == c; });
    if (s != std::end(kShort)) {
      alts.push_back({GrammarBuilder::byte('\\'), GrammarBuilder::byte(uint8_t(s->esc))});
      continue;
    }
    const int d = c & 15;
    low[c >> 4].set(size_t(d < 10 ? '0' + d : 'a' + d - 10));
    if (d >= 10) low[c >> 4].set(size_t('A' + d - 10));
  }
  for (int hi = 0; hi < 2; ++hi) {
    if (low[hi].none()) continue;
    RegexSeq seq;
    GrammarBuilder::append_literal(seq, hi ? "\\u001" : "\\u000");
    seq.push_back(GrammarBuilder::bytes(low[hi]));
    alts.push_back(std::move(seq));
  }
  if (set.non_ascii != CharSet::NonAscii::kNone) alts.push_back({GrammarBuilder::ref(multibyte(set.non_ascii))});
  const uint32_t rule = b_.rule("char-class", std::move(alts));
  sets_.emplace(key, rule);
  return GrammarBuilder::ref(rule);
}

namespace {

std::bitset<128> ascii_range(int lo, int hi) {
  std::bitset<128> s;
  for (int c = lo; c <= hi; ++c) s.set(size_t(c));
  return s;
}

CharSet ascii_set(std::bitset<128> bits) {
  CharSet s;
  s.ascii = bits;
  return s;
}

CharSet negated(const CharSet& s) {
  CharSet n;
  n.ascii = ~s.ascii;
  n.non_ascii = (s.non_ascii == CharSet::NonAscii::kNone && !s.non_ascii_partial) ? CharSet::NonAscii::kAll
                                                                                  : CharSet::NonAscii::kNone;
  n.non_ascii_partial = s.non_ascii_partial;
  return n;
}

void add(CharSet& to, const CharSet& s) {
  to.ascii |= s.ascii;
  to.non_ascii = std::max(to.non_ascii, s.non_ascii);
  to.non_ascii_partial = to.non_ascii_partial || s.non_ascii_partial;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// Recursive descent over the pattern, building rules as it goes.
class PatternCompiler {
 public:
  PatternCompiler(GrammarBuilder& b, JsonStringChars& chars, std::string_view p, int max_repeat, int max_depth)
      : b_(b), chars_(chars), p_(p), max_repeat_(max_repeat), max_depth_(max_depth) {}

  Result<uint32_t> run() {
    std::vector<RegexSeq> alts;
    do {
      const bool anchored_start = eat('^');
      bool anchored_end = false;
      RegexSeq body;
      AGENTKV_TRY(sequence(true, body, anchored_end));
      RegexSeq alt;
      if (!anchored_start) alt.push_back(chars_.any_star());
      alt.insert(alt.end(), body.begin(), body.end());
      if (!anchored_end) alt.push_back(chars_.any_star());
      alts.push_back(std::move(alt));
    } while (eat('|'));
    if (i_ < p_.size()) return fail("unmatched ')'");
    return b_.rule("pattern", std::move(alts));
  }

 private:
  struct Piece {
    RegexItem item;
    bool nullable = false;
    int weight = 1;  // the product of the finite bounds of the repeats nested in it
  };
  // A status for sequence() (Result needs a value).
  struct Ok {};

  Error fail(const std::string& what) const {
    return make_error(what + " at offset " + std::to_string(i_) + " of the pattern");
  }
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return at_end() ? '\0' : p_[i_]; }
  bool eat(char c) {
    if (at_end() || p_[i_] != c) return false;
    ++i_;
    return true;
  }

  // Items of one alternative, up to '|', ')' or the end; `nullable` for the whole.
  Result<Ok> sequence(bool top, RegexSeq& out, bool& anchored_end, bool* nullable = nullptr, int* weight = nullptr) {
    bool all_nullable = true;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (top && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) {
          ++i_;
          anchored_end = true;
          break;
        }
        return fail("'$' that does not end the pattern or a top-level alternative is not supported");
      }
      if (peek() == '^') return fail("'^' that does not start the pattern or a top-level alternative is not supported");
      Piece atom;
      AGENTKV_ASSIGN_OR_RETURN(atom, parse_atom());
      AGENTKV_ASSIGN_OR_RETURN(atom, quantified(atom));
      all_nullable = all_nullable && atom.nullable;
      if (weight) *weight = std::max(*weight, atom.weight);
      out.push_back(atom.item);
    }
    if (nullable) *nullable = all_nullable;
    return Ok{};
  }

  Result<Piece> group() {
    if (++depth_ > max_depth_) return fail("groups nested deeper than max_depth (" + std::to_string(max_depth_) + ")");
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
        const size_t close = p_.find('>', i_);
        if (close == std::string_view::npos) return fail("unterminated group name");
        i_ = close + 1;
      } else {
        return fail("lookaround (?=, ?!, ?<=, ?<!) is not supported");
      }
    }
    std::vector<RegexSeq> alts;
    bool nullable = false;
    int weight = 1;
    do {
      RegexSeq seq;
      bool unused = false, seq_nullable = false;
      AGENTKV_TRY(sequence(false, seq, unused, &seq_nullable, &weight));
      if (nullable && seq_nullable) return fail("two alternatives that can both match the empty string are not supported");
      nullable = nullable || seq_nullable;
      alts.push_back(std::move(seq));
    } while (eat('|'));
    if (!eat(')')) return fail("unterminated group");
    --depth_;
    return Piece{GrammarBuilder::ref(b_.rule("group", std::move(alts))), nullable, weight};
  }

  Result<Piece> parse_atom() {
    const char c = p_[i_++];
    switch (c) {
      case '(': return group();
      case '[': {
        CharSet set;
        AGENTKV_ASSIGN_OR_RETURN(set, parse_class());
        return set_piece(set);
      }
      case '.': {
        CharSet set = ascii_set(~(ascii_range('\n', '\n') | ascii_range('\r', '\r')));
        set.non_ascii = CharSet::NonAscii::kAllButLineSeparators;
        return set_piece(set);
      }
      case '\\': {
        CharSet set;
        uint32_t cp = 0;
        AGENTKV_TRY(parse_escape(false, set, cp));
        if (set.empty() && cp >= 0x80) return Piece{GrammarBuilder::ref(b_.literal(utf8(cp)))};
        return set_piece(set);
      }
      case '*': case '+': case '?': return fail("nothing to repeat");
      case ')': return fail("unmatched ')'");
      default: break;
    }
    const uint8_t u = uint8_t(c);
    if (u < 0x80) return set_piece(ascii_set(ascii_range(u, u)));
    // A literal non-ASCII character: its UTF-8 bytes (the pattern came from a JSON string, so they
    // are valid).
    const size_t len = u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : 2;
    const size_t start = i_ - 1;
    i_ = std::min(p_.size(), start + len);
    return Piece{GrammarBuilder::ref(b_.literal(p_.substr(start, i_ - start)))};
  }

  Result<Piece> set_piece(const CharSet& set) {
    if (set.empty()) return fail("a class that matches no character");
    return Piece{chars_.of(set)};
  }

  // After '\\'. A class escape (\d, \w, \s and their negations) or a character sets `set`; a
  // non-ASCII code point (\xHH over 7F, \uXXXX) is left in `cp` with `set` empty.
  Result<Ok> parse_escape(bool in_class, CharSet& set, uint32_t& cp) {
    if (at_end()) return fail("'\\' at the end of the pattern");
    const char c = p_[i_++];
    const auto digits = ascii_range('0', '9');
    const auto word = digits | ascii_range('a', 'z') | ascii_range('A', 'Z') | ascii_range('_', '_');
    const auto space = ascii_range('\t', '\r') | ascii_range(' ', ' ');
    auto one = [&](uint32_t code) {
      cp = code;
      if (code < 0x80) set = ascii_set(ascii_range(int(code), int(code)));
      return Ok{};
    };
    switch (c) {
      case 'd': set = ascii_set(digits); return Ok{};
      case 'w': set = ascii_set(word); return Ok{};
      case 's': set = ascii_set(space); set.non_ascii_partial = true; return Ok{};
      case 'D': set = negated(ascii_set(digits)); return Ok{};
      case 'W': set = negated(ascii_set(word)); return Ok{};
      case 'S': set = ascii_set(~space); set.non_ascii_partial = true; return Ok{};
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0':
        if (!at_end() && std::isdigit(uint8_t(peek()))) return fail("octal escapes are not supported");
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        return fail("'\\b' (a word boundary) is not supported");
      case 'x': case 'u': {
        const size_t n = c == 'x' ? 2 : 4;
        if (i_ + n > p_.size()) return fail("a short '\\" + std::string(1, c) + "' escape");
        uint32_t v = 0;
        for (size_t k = 0; k < n; ++k) {
          const char h = p_[i_ + k];
          if (!std::isxdigit(uint8_t(h))) return fail("a bad '\\" + std::string(1, c) + "' escape");
          v = v * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(uint8_t(h)) - 'a' + 10));
        }
        i_ += n;
        if (v >= 0xD800 && v <= 0xDFFF) return fail("a surrogate '\\u' escape is not supported");
        if (v >= 0x80 && in_class) return fail("a non-ASCII character in a class is not supported");
        return one(v);
      }
      default: break;
    }
    if (std::isalnum(uint8_t(c))) return fail("'\\" + std::string(1, c) + "' is not supported");
    if (uint8_t(c) >= 0x80) return fail("an escaped non-ASCII character is not supported");
    return one(uint8_t(c));
  }

  // After '['.
  Result<CharSet> parse_class() {
    const bool negate = eat('^');
    CharSet set;
    bool first = true;
    while (true) {
      if (at_end()) return fail("unterminated class");
      if (peek() == ']' && !first) break;
      if (peek() == ']') return fail("an empty class '[]' matches nothing");
      first = false;
      CharSet item;
      uint32_t lo = 0;
      AGENTKV_TRY(class_atom(item, lo));
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (item.ascii.count() != 1 || item.non_ascii != CharSet::NonAscii::kNone)
          return fail("a class escape in a range is not supported");
        CharSet hi_item;
        uint32_t hi = 0;
        AGENTKV_TRY(class_atom(hi_item, hi));
        if (hi_item.ascii.count() != 1 || hi_item.non_ascii != CharSet::NonAscii::kNone)
          return fail("a class escape in a range is not supported");
        if (hi < lo) return fail("a range out of order");
        item = ascii_set(ascii_range(int(lo), int(hi)));
      }
      add(set, item);
    }
    ++i_;  // ']'
    return negate ? negated(set) : set;
  }

  // One member of a class: a character (its code point in cp) or a class escape.
  Result<Ok> class_atom(CharSet& item, uint32_t& cp) {
    const uint8_t c = uint8_t(p_[i_++]);
    if (c == '\\') {
      AGENTKV_TRY(parse_escape(true, item, cp));
      return Ok{};
    }
    if (c >= 0x80) return fail("a non-ASCII character in a class is not supported");
    cp = c;
    item = ascii_set(ascii_range(c, c));
    return Ok{};
  }

  // {m}, {m,}, {m,n} after '{'; false (position unchanged) when it is not one (then '{' is literal).
  bool braces(int& lo, int& hi) {
    size_t j = i_;
    auto number = [&](int& v) {
      const size_t start = j;
      long long n = 0;
      while (j < p_.size() && std::isdigit(uint8_t(p_[j]))) n = std::min(n * 10 + (p_[j++] - '0'), 1LL << 40);
      v = int(std::min<long long>(n, 1 << 30));
      return j > start;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    return true;
  }

  Result<Piece> quantified(Piece atom) {
    int lo = 0, hi = 0;
    const char q = peek();
    if (q == '?' || q == '*' || q == '+') {
      ++i_;
      lo = q == '+' ? 1 : 0;
      hi = q == '?' ? 1 : -1;
    } else if (q == '{') {
      ++i_;
      if (!braces(lo, hi)) {
        --i_;
        return atom;
      }
    } else {
      return atom;
    }
    eat('?');  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?') return fail("nothing to repeat");
    if (hi >= 0 && hi < lo) return fail("a quantifier {m,n} with n < m");
    if (lo > max_repeat_ || hi > max_repeat_)
      return fail("a repeat bound over max_repeat (" + std::to_string(max_repeat_) + ")");
    if (hi == 0) return Piece{GrammarBuilder::ref(b_.rule("empty", {RegexSeq{}})), true};
    // What can match the empty string already is its own `?`; any other repeat of it would give the
    // matcher many ways through the empty string (exponential in a chain of them).
    if (atom.nullable && hi == 1) return atom;
    if (atom.nullable) return fail("a repeat of what can match the empty string is not supported");
    const int64_t weight = int64_t(atom.weight) * std::max(hi, 1);
    if (weight > max_repeat_)
      return fail("nested repeats whose bounds multiply past max_repeat (" + std::to_string(max_repeat_) + ")");
    const bool nullable = lo == 0;
    Piece out{GrammarBuilder::ref(0), nullable, int(weight)};
    if (lo == 0 && hi == 1) out.item = GrammarBuilder::ref(b_.optional(atom.item));
    else if (lo == 0 && hi < 0) out.item = GrammarBuilder::ref(b_.star(atom.item));
    else if (lo == 1 && hi < 0) out.item = GrammarBuilder::ref(b_.plus(atom.item));
    else out.item = GrammarBuilder::ref(b_.repeat(atom.item, lo, hi));
    return out;
  }

  GrammarBuilder& b_;
  JsonStringChars& chars_;
  std::string_view p_;
  size_t i_ = 0;
  int max_repeat_, max_depth_, depth_ = 0;
};

}  // namespace

Result<uint32_t> compile_pattern(GrammarBuilder& b, JsonStringChars& chars, std::string_view pattern,
                                 int max_repeat, int max_depth) {
  return PatternCompiler(b, chars, pattern, max_repeat, max_depth).run();
}

}  // namespace agentkv
