// The characters of a JSON string body and JSON Schema `pattern` regexes, as grammar rules
// (engine/grammar.h) over the bytes between a string's quotes. Used by engine/json_schema_grammar
// for plain strings, minLength/maxLength, `pattern` and `format` (each format is a pattern).
//
// A character the grammar generates is always one valid JSON string character: printable ASCII raw
// except " and \ (written \" and \\), control characters escaped, other code points as valid UTF-8.
// A regex compiles to exactly the strings it matches, except where noted in regex_grammar.cpp (the
// non-ASCII part of \s and \S, which the grammar then generates none of): the grammar may generate
// fewer strings than the regex matches, never a string it does not match.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "engine/grammar.h"
#include "util/status.h"

namespace agentkv {

// A set of characters: ASCII exactly; the code points from U+0080 up all, none, or all but U+2028
// and U+2029 (which `.` leaves out, with \n and \r).
struct CharSet {
  enum class NonAscii : uint8_t { kNone, kAllButLineSeparators, kAll };
  std::bitset<128> ascii;
  NonAscii non_ascii = NonAscii::kNone;
  // Some non-ASCII characters of the regex's set are missing here (from \s, \S): the complement of
  // this set would hold characters the regex's complement does not, so it takes no non-ASCII.
  bool non_ascii_partial = false;

  bool empty() const { return ascii.none() && non_ascii == NonAscii::kNone; }
};

// The rules for one character of a JSON string body, each made once per grammar on first use.
class JsonStringChars {
 public:
  explicit JsonStringChars(GrammarBuilder& b) : b_(b) {}

  // Any one character in any JSON form: raw, \" \\ \/ \b \f \n \r \t, \uXXXX (a surrogate only as
  // a high-low pair), or a valid UTF-8 multi-byte sequence. Never a raw control byte.
  GrammarBuilder::Item any();
  // any()* (the unanchored ends of a pattern).
  GrammarBuilder::Item any_star();
  // One character of `set`, each in one JSON form: raw where JSON allows it, else escaped.
  GrammarBuilder::Item of(const CharSet& set);

 private:
  uint32_t multibyte(CharSet::NonAscii which);

  GrammarBuilder& b_;
  int64_t any_ = -1, any_star_ = -1, multibyte_all_ = -1, multibyte_no_line_sep_ = -1;
  std::map<std::string, uint32_t> sets_;  // of(): one rule per distinct set
};

// The rule of a whole string body matching `pattern` (ECMA 262 syntax, the subset in
// regex_grammar.cpp; unanchored unless it starts with ^ / ends with $, as JSON Schema says).
// A quantifier bound over max_repeat or groups nested deeper than max_depth are refused. Errors
// (kInvalidArgument) say what is not supported and at which offset of the pattern.
Result<uint32_t> compile_pattern(GrammarBuilder& b, JsonStringChars& chars, std::string_view pattern,
                                 int max_repeat, int max_depth);

}  // namespace agentkv
