// A context-free grammar over bytes, for constrained decoding (structured outputs, tool calls).
// Rules are alternatives of sequences; an element is a set of bytes, a reference to a rule, or
// "any bytes to the end" (free text: the matcher stops constraining). Grammars are built with
// GrammarBuilder and checked by build(): every rule has an alternative, every reference resolves and
// no rule is left-recursive (a rule that can reach itself without consuming a byte), so the matcher
// (engine/grammar_matcher.h) can always expand a stack in finite time.
//
// Writers: engine/json_schema_grammar.h (JSON Schema, any JSON), the tool-call formats of the server.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace agentkv {

using ByteSet = std::bitset<256>;

struct GrammarElement {
  enum class Kind : uint8_t {
    kEnd,      // ends an alternative
    kBytes,    // one byte from byte_sets[arg]
    kRule,     // the rule `arg`
    kAnyRest,  // any bytes, to the end of the output; the last element of its alternative
  };
  Kind kind = Kind::kEnd;
  uint32_t arg = 0;
};

// The built form the matcher reads: all alternatives in one array, each ended by kEnd.
struct Grammar {
  std::vector<GrammarElement> elements;
  std::vector<std::vector<uint32_t>> rule_alternatives;  // rule id -> start index of each alternative
  std::vector<ByteSet> byte_sets;
  std::vector<std::string> rule_names;                   // for errors and dumps
  uint32_t root = 0;
  // For each element index: the fewest bytes that finish its alternative from there (kNever when it
  // cannot finish). The matcher sums these over a stack to know how short a completion can be.
  std::vector<uint32_t> min_rest;
  static constexpr uint32_t kNever = uint32_t(1) << 30;

  // The grammar in a GBNF-like text, one rule per line (tests and debugging).
  std::string dump() const;
};

class GrammarBuilder {
 public:
  // One element of a sequence being built.
  struct Item {
    GrammarElement::Kind kind = GrammarElement::Kind::kBytes;
    ByteSet bytes;       // kBytes
    uint32_t rule = 0;   // kRule
  };
  using Seq = std::vector<Item>;

  static Item bytes(const ByteSet& set);
  static Item byte(uint8_t b);
  static Item range(uint8_t lo, uint8_t hi);  // [lo, hi]
  static Item ref(uint32_t rule);
  static Item any_rest();

  // A new rule with no alternatives yet (to be referenced before it is defined, e.g. recursion).
  uint32_t declare(std::string name);
  void add_alternative(uint32_t rule, Seq seq);  // an empty seq is the empty alternative

  // Helpers; each returns a new rule.
  uint32_t rule(std::string name, std::vector<Seq> alternatives);
  uint32_t literal(std::string_view text);             // exactly these bytes
  uint32_t optional(const Item& item);                 // item | ε
  uint32_t star(const Item& item);                     // item* (right-recursive)
  uint32_t plus(const Item& item);                     // item+
  // item{min,max}; max < 0: unbounded. Nested optionals, so the rule count is O(max).
  uint32_t repeat(const Item& item, int min, int max);
  // Appends the bytes of `text` to seq, one element per byte.
  static void append_literal(Seq& seq, std::string_view text);

  size_t n_rules() const { return rules_.size(); }

  // Checks and flattens; `root` is the start rule. Errors name the rule.
  Result<std::shared_ptr<const Grammar>> build(uint32_t root) const;

 private:
  struct RuleDef {
    std::string name;
    std::vector<Seq> alternatives;
  };
  std::vector<RuleDef> rules_;
};

}  // namespace agentkv
