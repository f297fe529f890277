// The grammar builder and its checks (engine/grammar.h).
#include "engine/grammar.h"

#include <cstdio>
#include <algorithm>
#include <functional>
#include <unordered_map>

namespace agentkv {

namespace {

std::string byte_set_text(const ByteSet& s) {
  if (s.count() == 1)
    for (int b = 0; b < 256; ++b)
      if (s[size_t(b)]) {
        char buf[16];
        if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '[') std::snprintf(buf, sizeof buf, "%c", b);
        else std::snprintf(buf, sizeof buf, "\\x%02x", b);
        return std::string("[") + buf + "]";
      }
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s[size_t(b)]) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s[size_t(e + 1)]) ++e;
    char buf[32];
    if (e == b) std::snprintf(buf, sizeof buf, "\\x%02x", b);
    else std::snprintf(buf, sizeof buf, "\\x%02x-\\x%02x", b, e);
    out += buf;
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::dump() const {
  std::string out;
  for (size_t r = 0; r < rule_alternatives.size(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < rule_alternatives[r].size(); ++a) {
      if (a) out += " |";
      for (uint32_t i = rule_alternatives[r][a]; elements[i].kind != GrammarElement::Kind::kEnd; ++i) {
        const GrammarElement& e = elements[i];
        out += " ";
        if (e.kind == GrammarElement::Kind::kBytes) out += byte_set_text(byte_sets[e.arg]);
        else if (e.kind == GrammarElement::Kind::kRule) out += rule_names[e.arg];
        else out += "ANY*";
      }
      if (elements[rule_alternatives[r][a]].kind == GrammarElement::Kind::kEnd) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

GrammarBuilder::Item GrammarBuilder::bytes(const ByteSet& set) {
  Item it;
  it.kind = GrammarElement::Kind::kBytes;
  it.bytes = set;
  return it;
}

GrammarBuilder::Item GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

GrammarBuilder::Item GrammarBuilder::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(size_t(b));
  return bytes(s);
}

GrammarBuilder::Item GrammarBuilder::ref(uint32_t rule) {
  Item it;
  it.kind = GrammarElement::Kind::kRule;
  it.rule = rule;
  return it;
}

GrammarBuilder::Item GrammarBuilder::any_rest() {
  Item it;
  it.kind = GrammarElement::Kind::kAnyRest;
  return it;
}

uint32_t GrammarBuilder::declare(std::string name) {
  rules_.push_back(RuleDef{std::move(name), {}});
  return uint32_t(rules_.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, Seq seq) { rules_.at(rule).alternatives.push_back(std::move(seq)); }

uint32_t GrammarBuilder::rule(std::string name, std::vector<Seq> alternatives) {
  const uint32_t r = declare(std::move(name));
  rules_[r].alternatives = std::move(alternatives);
  return r;
}

void GrammarBuilder::append_literal(Seq& seq, std::string_view text) {
  for (unsigned char c : text) seq.push_back(byte(c));
}

uint32_t GrammarBuilder::literal(std::string_view text) {
  Seq s;
  append_literal(s, text);
  return rule("literal", {std::move(s)});
}

uint32_t GrammarBuilder::optional(const Item& item) { return rule("opt", {{item}, {}}); }

uint32_t GrammarBuilder::star(const Item& item) {
  const uint32_t r = declare("star");
  add_alternative(r, {item, ref(r)});
  add_alternative(r, {});
  return r;
}

uint32_t GrammarBuilder::plus(const Item& item) {
  const uint32_t s = star(item);
  return rule("plus", {{item, ref(s)}});
}

uint32_t GrammarBuilder::repeat(const Item& item, int min, int max) {
  // tail = up to (max - min) more items: opt_k ::= item opt_{k-1} | ε, built from the inside out.
  Seq seq(size_t(std::max(min, 0)), item);
  if (max < 0) {
    seq.push_back(ref(star(item)));
  } else if (max > min) {
    uint32_t tail = optional(item);
    for (int k = min + 1; k < max; ++k) tail = rule("opt", {{item, ref(tail)}, {}});
    seq.push_back(ref(tail));
  }
  return rule("repeat", {std::move(seq)});
}

Result<std::shared_ptr<const Grammar>> GrammarBuilder::build(uint32_t root) const {
  const size_t n = rules_.size();
  if (root >= n) return make_error(ErrorCode::kInternal, "grammar: root rule " + std::to_string(root) + " does not exist");
  for (size_t r = 0; r < n; ++r) {
    if (rules_[r].alternatives.empty())
      return make_error(ErrorCode::kInternal, "grammar: rule '" + rules_[r].name + "' has no alternative");
    for (const Seq& s : rules_[r].alternatives)
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i].kind == GrammarElement::Kind::kRule && s[i].rule >= n)
          return make_error(ErrorCode::kInternal, "grammar: rule '" + rules_[r].name + "' refers to a missing rule");
        if (s[i].kind == GrammarElement::Kind::kAnyRest && i + 1 != s.size())
          return make_error(ErrorCode::kInternal, "grammar: ANY* must end its alternative in '" + rules_[r].name + "'");
      }
  }
  // Nullable rules (can match no bytes), to a fixed point; then left recursion: a rule reachable from
  // itself through leading elements that are all nullable.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Seq& s : rules_[r].alternatives) {
        bool all = true;
        for (const Item& it : s)
          if (!(it.kind == GrammarElement::Kind::kRule && nullable[it.rule]) && it.kind != GrammarElement::Kind::kAnyRest) {
            all = false;
            break;
          }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> left(n);  // rules that can start rule r without a byte
  for (size_t r = 0; r < n; ++r)
    for (const Seq& s : rules_[r].alternatives)
      for (const Item& it : s) {
        if (it.kind != GrammarElement::Kind::kRule) break;
        left[r].push_back(it.rule);
        if (!nullable[it.rule]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::string cycle;
  std::function<bool(uint32_t)> dfs = [&](uint32_t r) {
    color[r] = 1;
    for (uint32_t c : left[r]) {
      if (color[c] == 1) {
        cycle = rules_[c].name;
        return true;
      }
      if (color[c] == 0 && dfs(c)) return true;
    }
    color[r] = 2;
    return false;
  };
  for (uint32_t r = 0; r < n; ++r)
    if (color[r] == 0 && dfs(r))
      return make_error(ErrorCode::kInternal, "grammar: rule '" + cycle + "' is left-recursive");

  auto g = std::make_shared<Grammar>();
  g->root = root;
  g->rule_alternatives.resize(n);
  g->rule_names.reserve(n);
  for (size_t r = 0; r < n; ++r) g->rule_names.push_back(rules_[r].name + "_" + std::to_string(r));
  std::unordered_map<ByteSet, uint32_t> set_ids;
  for (size_t r = 0; r < n; ++r)
    for (const Seq& s : rules_[r].alternatives) {
      g->rule_alternatives[r].push_back(uint32_t(g->elements.size()));
      for (const Item& it : s) {
        GrammarElement e;
        e.kind = it.kind;
        if (it.kind == GrammarElement::Kind::kBytes) {
          // Equal sets share one entry (the JSON rules repeat a few sets many times).
          auto [pos, added] = set_ids.try_emplace(it.bytes, uint32_t(g->byte_sets.size()));
          if (added) g->byte_sets.push_back(it.bytes);
          e.arg = pos->second;
        } else if (it.kind == GrammarElement::Kind::kRule) {
          e.arg = it.rule;
        }
        g->elements.push_back(e);
      }
      g->elements.push_back(GrammarElement{});
    }
  // Shortest completions: each rule's fewest bytes to a fixed point, then each element's rest of
  // its alternative, from the back.
  std::vector<uint32_t> rule_min(n, Grammar::kNever);
  auto element_min = [&](const GrammarElement& e) -> uint32_t {
    if (e.kind == GrammarElement::Kind::kBytes) return 1;
    if (e.kind == GrammarElement::Kind::kRule) return rule_min[e.arg];
    return 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (uint32_t start : g->rule_alternatives[r]) {
        uint64_t sum = 0;
        for (uint32_t i = start; g->elements[i].kind != GrammarElement::Kind::kEnd; ++i) sum += element_min(g->elements[i]);
        const uint32_t len = uint32_t(std::min<uint64_t>(sum, Grammar::kNever));
        if (len < rule_min[r]) {
          rule_min[r] = len;
          changed = true;
        }
      }
  }
  g->min_rest.assign(g->elements.size(), 0);
  for (size_t i = g->elements.size(); i-- > 0;) {
    const GrammarElement& e = g->elements[i];
    if (e.kind == GrammarElement::Kind::kEnd) continue;
    g->min_rest[i] = uint32_t(std::min<uint64_t>(uint64_t(element_min(e)) + g->min_rest[i + 1], Grammar::kNever));
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace agentkv
