// The grammar matcher and the vocabulary trie (engine/grammar_matcher.h).
#include "engine/grammar_matcher.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

namespace agentkv {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::build(const Tokenizer& tok) {
  std::vector<std::string> pieces;
  pieces.reserve(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) pieces.push_back(tok.token_to_piece(id, false));
  return from_pieces(pieces, tok.eog_ids());
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_pieces(const std::vector<std::string>& pieces,
                                                                     const std::vector<int32_t>& eog_ids) {
  auto v = std::make_shared<TokenVocabulary>();
  const int32_t n = int32_t(pieces.size());
  v->n_vocab_ = n;
  v->offsets_.reserve(size_t(n) + 1);
  for (const std::string& p : pieces) {
    v->offsets_.push_back(uint32_t(v->blob_.size()));
    v->blob_ += p;
  }
  v->offsets_.push_back(uint32_t(v->blob_.size()));
  v->eog_.assign(size_t(n), false);
  for (int32_t id : eog_ids)
    if (id >= 0 && id < n && !v->eog_[size_t(id)]) {
      v->eog_[size_t(id)] = true;
      v->eog_ids_.push_back(id);
    }

  // Tokens with bytes, sorted by their bytes; each string's nodes hang off the longest prefix it
  // shares with the one before it.
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n; ++id)
    if (!v->bytes(id).empty() && !v->eog_[size_t(id)]) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const std::string_view x = v->bytes(a), y = v->bytes(b);
    return x < y || (x == y && a < b);
  });
  v->nodes_.push_back(Node{});
  std::vector<uint32_t> path{0};  // node index per depth
  std::string_view prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      v->nodes_[path.back()].end = uint32_t(v->nodes_.size());
      path.pop_back();
    }
  };
  for (int32_t id : ids) {
    const std::string_view s = v->bytes(id);
    size_t lcp = 0;
    while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
    close_to(lcp);
    for (size_t d = lcp; d < s.size(); ++d) {
      Node node;
      node.byte = uint8_t(s[d]);
      node.depth = uint16_t(d + 1);
      node.token_begin = node.token_end = uint32_t(v->trie_tokens_.size());
      path.push_back(uint32_t(v->nodes_.size()));
      v->nodes_.push_back(node);
    }
    v->trie_tokens_.push_back(id);
    v->nodes_[path.back()].token_end = uint32_t(v->trie_tokens_.size());
    prev = s;
  }
  close_to(0);
  v->nodes_[0].end = uint32_t(v->nodes_.size());
  return v;
}

std::string_view TokenVocabulary::bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab_) return {};
  return std::string_view(blob_).substr(offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : g_(std::move(grammar)), vocab_(std::move(vocab)) {
  std::vector<int32_t> start;
  expanded_.clear();
  for (uint32_t alt : g_->rule_alternatives[g_->root]) expand_rec(alt, -1, start, 0);
  state_ = intern_state(std::move(start));
}

int32_t GrammarMatcher::intern_node(uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(pos) << 32) | uint32_t(parent);
  auto [it, added] = node_ids_.try_emplace(key, int32_t(nodes_.size()));
  if (added) {
    const uint64_t rest = uint64_t(g_->min_rest[pos]) + (parent >= 0 ? nodes_[size_t(parent)].min_rest : 0);
    nodes_.push_back(StackNode{pos, parent, uint32_t(std::min<uint64_t>(rest, Grammar::kNever))});
  }
  return it->second;
}

void GrammarMatcher::expand_rec(uint32_t pos, int32_t parent, std::vector<int32_t>& out, int depth) {
  if (!expanded_.insert((uint64_t(pos) << 32) | uint32_t(parent)).second) return;
  // build() refused left recursion, so this ends; the bound only guards against a grammar so deep
  // that the recursion itself would be the problem.
  if (depth > 4096 || nodes_.size() > kMaxNodes || out.size() > kMaxStacksPerState) {
    overflowed_ = true;
    return;
  }
  const GrammarElement& e = g_->elements[pos];
  switch (e.kind) {
    case GrammarElement::Kind::kEnd:
      if (parent < 0) {
        out.push_back(-1);
      } else {
        const StackNode up = nodes_[size_t(parent)];
        expand_rec(up.pos, up.parent, out, depth + 1);
      }
      return;
    case GrammarElement::Kind::kBytes:
    case GrammarElement::Kind::kAnyRest:
      out.push_back(intern_node(pos, parent));
      return;
    case GrammarElement::Kind::kRule: {
      // A rule referenced last in its alternative returns straight to the caller's caller, so
      // right recursion (x*, lists) keeps stacks the same height.
      const int32_t ret = g_->elements[pos + 1].kind == GrammarElement::Kind::kEnd ? parent : intern_node(pos + 1, parent);
      for (uint32_t alt : g_->rule_alternatives[e.arg]) expand_rec(alt, ret, out, depth + 1);
      return;
    }
  }
}

int32_t GrammarMatcher::intern_state(std::vector<int32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key(stacks.size() * sizeof(int32_t), '\0');
  if (!stacks.empty()) std::memcpy(key.data(), stacks.data(), key.size());
  auto [it, added] = state_ids_.try_emplace(std::move(key), int32_t(states_.size()));
  if (added) {
    StateInfo info;
    info.min_rest = Grammar::kNever;
    for (int32_t s : stacks) {
      info.min_rest = std::min(info.min_rest, s < 0 ? 0u : nodes_[size_t(s)].min_rest);
      if (s < 0) {
        info.complete = true;
        continue;
      }
      info.can_continue = true;
      if (g_->elements[nodes_[size_t(s)].pos].kind == GrammarElement::Kind::kAnyRest) {
        info.any_rest = info.complete = true;
        info.min_rest = 0;
      }
    }
    info.stacks = std::move(stacks);
    states_.push_back(std::move(info));
  }
  return it->second;
}

int32_t GrammarMatcher::step(int32_t state, uint8_t byte) {
  if (states_[size_t(state)].next.empty()) states_[size_t(state)].next.assign(256, kUnknown);
  if (const int32_t known = states_[size_t(state)].next[byte]; known != kUnknown) return known;
  std::vector<int32_t> out;
  expanded_.clear();  // one expansion for all stacks: what one reached, another need not
  for (int32_t s : states_[size_t(state)].stacks) {
    if (s < 0) continue;
    const StackNode n = nodes_[size_t(s)];
    const GrammarElement& e = g_->elements[n.pos];
    if (e.kind == GrammarElement::Kind::kAnyRest) out.push_back(s);
    else if (e.kind == GrammarElement::Kind::kBytes && g_->byte_sets[e.arg][byte]) expand_rec(n.pos + 1, n.parent, out, 0);
  }
  if (out.size() > kMaxStacksPerState || states_.size() >= kMaxStates) overflowed_ = true;
  if (overflowed_) return kDead;  // and not cached: nothing is allowed any more
  const int32_t next = out.empty() ? kDead : intern_state(std::move(out));
  states_[size_t(state)].next[byte] = next;  // states_ may have grown: index again
  return next;
}

int32_t GrammarMatcher::walk(int32_t state, std::string_view bytes) {
  for (unsigned char c : bytes) {
    state = step(state, c);
    if (state == kDead) return kDead;
  }
  return state;
}

void GrammarMatcher::compact_if_large() {
  if (states_.size() < kCompactStates && nodes_.size() < kMaxNodes / 2) return;
  const std::vector<StackNode> old = std::move(nodes_);
  const std::vector<int32_t> stacks = states_[size_t(state_)].stacks;
  nodes_.clear();
  node_ids_.clear();
  states_.clear();
  state_ids_.clear();
  mask_cache_.clear();
  std::unordered_map<int32_t, int32_t> moved{{-1, -1}};  // old node id -> new
  std::vector<int32_t> chain;
  std::vector<int32_t> renumbered;
  for (int32_t s : stacks) {
    // Up the stack to a node already moved (or the bottom), then re-intern back down: no
    // recursion, however deep the stack (a JSON answer nested thousands deep).
    chain.clear();
    for (int32_t id = s; !moved.count(id); id = old[size_t(id)].parent) chain.push_back(id);
    for (size_t k = chain.size(); k-- > 0;) {
      const StackNode& n = old[size_t(chain[k])];
      moved[chain[k]] = intern_node(n.pos, moved.at(n.parent));
    }
    renumbered.push_back(moved.at(s));
  }
  state_ = intern_state(std::move(renumbered));
}

bool GrammarMatcher::plan_of(int32_t state, std::vector<int32_t>& tokens) {
  tokens.clear();
  // The shortest completion's bytes: from each state, the lowest byte that brings the rest down by one.
  std::string text;
  for (int32_t s = state; !states_[size_t(s)].complete;) {
    const uint32_t rest = states_[size_t(s)].min_rest;
    if (rest >= Grammar::kNever || text.size() >= kMaxPlanBytes) return false;
    int32_t next = kDead;
    for (int b = 0; b < 256 && next == kDead; ++b) {
      const int32_t n = step(s, uint8_t(b));
      if (n != kDead && states_[size_t(n)].min_rest + 1 == rest) {
        next = n;
        text.push_back(char(b));
      }
    }
    if (next == kDead) return false;  // overflowed, or a bound that no byte meets
    s = next;
  }
  // The fewest tokens covering those bytes: best[i] tokens cover text[i..], choice[i] the first of them.
  const auto& nodes = vocab_->nodes();
  const auto& toks = vocab_->trie_tokens();
  const size_t n = text.size();
  std::vector<uint32_t> best(n + 1, kPlanUnknown);
  std::vector<int32_t> choice(n + 1, -1);
  best[n] = 0;
  for (size_t i = n; i-- > 0;) {
    uint32_t at = 0;  // the trie node of text[i..j)
    for (size_t j = i; j < n; ++j) {
      uint32_t child = at + 1, found = 0;
      for (; child < nodes[at].end; child = nodes[child].end)
        if (nodes[child].byte == uint8_t(text[j])) {
          found = child;
          break;
        }
      if (!found) break;
      at = found;
      if (nodes[at].token_begin < nodes[at].token_end && best[j + 1] != kPlanUnknown && best[j + 1] + 1 < best[i]) {
        best[i] = best[j + 1] + 1;
        choice[i] = toks[nodes[at].token_begin];
      }
    }
  }
  if (best[0] == kPlanUnknown) return false;
  for (size_t i = 0; i < n; i += vocab_->bytes(choice[i]).size()) tokens.push_back(choice[i]);
  return true;
}

uint32_t GrammarMatcher::closing_tokens(int32_t state) {
  if (!vocab_ || overflowed_) return kNoBudget;
  if (states_[size_t(state)].plan_tokens == kPlanUnknown) {
    std::vector<int32_t> plan;
    const uint32_t len = plan_of(state, plan) ? uint32_t(std::min<size_t>(plan.size(), kNoBudget)) : kNoBudget;
    states_[size_t(state)].plan_tokens = len;  // states_ may have grown: index again
  }
  return states_[size_t(state)].plan_tokens;
}

std::vector<int32_t> GrammarMatcher::closing_plan() {
  std::vector<int32_t> plan;
  if (!vocab_ || overflowed_ || !plan_of(state_, plan)) plan.clear();
  return plan;
}

bool GrammarMatcher::accepts_bytes(std::string_view bytes) {
  compact_if_large();
  return walk(state_, bytes) != kDead;
}

bool GrammarMatcher::advance_bytes(std::string_view bytes) {
  compact_if_large();
  const int32_t s = walk(state_, bytes);
  if (s == kDead) return false;
  state_ = s;
  return true;
}

bool GrammarMatcher::complete() const { return states_[size_t(state_)].complete; }
bool GrammarMatcher::can_continue() const { return states_[size_t(state_)].can_continue; }
bool GrammarMatcher::unconstrained() const { return states_[size_t(state_)].any_rest; }

bool GrammarMatcher::allows(int32_t token, uint32_t max_rest) {
  if (overflowed_) return false;
  if (vocab_->is_eog(token)) return complete();
  const std::string_view b = vocab_->bytes(token);
  if (b.empty()) return false;
  compact_if_large();
  const int32_t s = walk(state_, b);
  return s != kDead && (states_[size_t(s)].min_rest <= max_rest || closing_tokens(s) <= max_rest);
}

bool GrammarMatcher::accept(int32_t token) {
  if (overflowed_) return false;
  if (vocab_->is_eog(token)) return complete();
  const std::string_view b = vocab_->bytes(token);
  return !b.empty() && advance_bytes(b);
}

void GrammarMatcher::fill_mask(std::vector<uint8_t>& mask, uint32_t max_rest) {
  const int32_t n = vocab_->n_vocab();
  if (overflowed_) {
    mask.assign(size_t(n), 0);
    return;
  }
  compact_if_large();
  if (unconstrained()) {
    mask.assign(size_t(n), 1);
    return;
  }
  if (auto it = mask_cache_.find(state_); it != mask_cache_.end() && it->second.needs <= max_rest) {
    ++masks_cached_;
    mask = it->second.mask;
    return;
  }
  ++masks_computed_;
  mask.assign(size_t(n), 0);
  const auto& nodes = vocab_->nodes();
  const auto& toks = vocab_->trie_tokens();
  std::vector<int32_t> at_depth(1, state_);  // the state after the bytes of the current path
  uint32_t needs = 0;
  bool over_budget = false;  // a token was left out for the budget: the mask holds for this budget only
  for (uint32_t i = 1; i < nodes.size();) {
    const TokenVocabulary::Node& node = nodes[i];
    const int32_t s = step(at_depth[node.depth - 1u], node.byte);
    if (s == kDead) {
      i = node.end;
      continue;
    }
    if (states_[size_t(s)].any_rest) {  // everything below is allowed (and complete: no budget to keep)
      for (uint32_t k = node.token_begin; k < nodes[node.end - 1].token_end; ++k) mask[size_t(toks[k])] = 1;
      i = node.end;
      continue;
    }
    if (at_depth.size() <= node.depth) at_depth.resize(node.depth + 1u);
    at_depth[node.depth] = s;
    if (node.token_begin < node.token_end) {
      // The tokens the answer needs after this one: its bytes where they fit, else its closing plan
      // (computed only then, once per state).
      const uint32_t rest = states_[size_t(s)].min_rest;
      const uint32_t need = rest <= max_rest ? rest : closing_tokens(s);
      if (need <= max_rest) {
        needs = std::max(needs, need);
        for (uint32_t k = node.token_begin; k < node.token_end; ++k) mask[size_t(toks[k])] = 1;
      } else {
        over_budget = true;
      }
    }
    ++i;
  }
  if (complete())
    for (int32_t e : vocab_->eog_ids()) mask[size_t(e)] = 1;
  if (over_budget) return;
  if (mask_cache_.size() >= 32) mask_cache_.clear();  // a few states recur (inside a string); bound the rest
  mask_cache_[state_] = CachedMask{mask, needs};
}

}  // namespace agentkv
