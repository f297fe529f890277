#include "engine/compact_context.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "util/status.h"

namespace agentkv {

namespace {

KvSlotRange slots_of(const KvSequence& s, int64_t slot0) {
  return KvSlotRange{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, int32_t(slot0)};
}

}  // namespace

std::pair<int64_t, int64_t> droppable_blocks(int64_t begin, int64_t n, int block_size) {
  const int64_t first = (begin + block_size - 1) / block_size, last = (begin + n) / block_size;
  return last > first ? std::make_pair(first, last) : std::make_pair(first, first);
}

std::vector<BlendedRun> find_echoes(const KvSequence& ctx, int64_t from, int64_t to,
                                    const std::shared_ptr<const KvSequence>& master, int32_t master_start,
                                    int64_t min_tokens, double keep) {
  std::vector<BlendedRun> out;
  const std::vector<int32_t>& a = ctx.tokens();
  to = std::min<int64_t>(to, int64_t(a.size()));
  if (!master || master_start < 0 || from < 0 || min_tokens < 1 || to - from < min_tokens) return out;
  const std::vector<int32_t>& b = master->tokens();
  const int64_t nb = int64_t(b.size());
  // The master's k-grams (k: min_tokens, at most 8), by hash; a k-gram held more than kMaxCandidates
  // times (a repeated phrase) keeps its first ones.
  const int64_t k = std::min<int64_t>(min_tokens, 8);
  constexpr size_t kMaxCandidates = 64;
  auto gram = [k](const std::vector<int32_t>& t, int64_t at) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t j = 0; j < k; ++j) h = (h ^ uint32_t(t[size_t(at + j)])) * 1099511628211ull;
    return h;
  };
  std::unordered_map<uint64_t, std::vector<int64_t>> where;
  for (int64_t q = master_start; q + k <= nb; ++q) {
    std::vector<int64_t>& v = where[gram(b, q)];
    if (v.size() < kMaxCandidates) v.push_back(q);
  }
  for (int64_t p = from; p + min_tokens <= to;) {
    int64_t best = 0, best_q = -1;
    if (auto it = where.find(gram(a, p)); it != where.end()) {
      for (int64_t q : it->second) {
        int64_t len = 0;
        while (p + len < to && q + len < nb && a[size_t(p + len)] == b[size_t(q + len)]) ++len;
        if (len > best) best = len, best_q = q;
      }
    }
    if (best >= min_tokens) {
      out.push_back(BlendedRun{p, best, master, int32_t(best_q), keep});
      p += best;
    } else {
      ++p;
    }
  }
  return out;
}

Result<std::optional<double>> parse_echo_keep(std::string_view text) {
  if (text == "off") return std::optional<double>();
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= 0 && v <= 1))
    return make_error("'" + s + "' is not off or a share in [0, 1]");
  return std::optional<double>(v);
}

std::optional<CompactContext> CompactContext::compact(const KvSequence& dense, const std::vector<BlendedRun>& runs,
                                                      const Model& model, ThreadPool& pool, DiffFormat format,
                                                      std::vector<PlacedDiff> inherited) {
  const int bs = dense.manager().block_size();
  const auto& toks = dense.tokens();
  auto kept = std::make_shared<KvSequence>(dense.fork());
  // Every diff's rows, the inherited ones' too, packed together: one partial block per context.
  std::vector<int64_t> begins;
  std::vector<SegmentDiff::Spec> specs;
  std::vector<double> keeps;  // per spec: BlendedRun::keep (1 for an inherited diff)
  std::vector<PlacedDiff> diffs;
  for (PlacedDiff& d : inherited) {
    const auto mt = d.second->master()->tokens();
    const int64_t n = int64_t(mt.size());
    // Whole blocks (what a compact form drops) holding the diff's tokens: still dense here (re-encoded
    // from them), or still holes (a context resumed in master–diff form: its records copied as they are,
    // or, in another format than `format`, the diff kept as it is, its packed rows shared).
    if (d.first % bs != 0 || n % bs != 0 || d.first + n > dense.n_tokens() ||
        !std::equal(mt.begin(), mt.end(), toks.begin() + d.first))
      return std::nullopt;
    const bool holes = std::all_of(dense.blocks().begin() + d.first / bs, dense.blocks().begin() + (d.first + n) / bs,
                                   [](int32_t b) { return b == KvSequence::kHole; });
    if (!holes && !dense.has_kv(d.first, d.first + n)) return std::nullopt;
    kept->drop_blocks(d.first / bs, (d.first + n) / bs);
    if (holes && d.second->packed_rows()->codec().format() != format) {
      diffs.push_back(std::move(d));
      continue;
    }
    begins.push_back(d.first);
    keeps.push_back(1);
    specs.push_back(SegmentDiff::Spec{d.second->master(), slots_of(dense, d.first), d.second->pos0(),
                                      holes ? d.second->rows() : std::vector<int32_t>{},
                                      holes ? d.second.get() : nullptr});
  }
  for (const BlendedRun& r : runs) {
    if (!r.master || r.begin < 0 || r.n <= 0 || r.begin + r.n > dense.n_tokens() || r.master_start < 0 ||
        r.master_start + r.n > r.master->n_tokens() ||
        !std::equal(toks.begin() + r.begin, toks.begin() + r.begin + r.n, r.master->tokens().begin() + r.master_start))
      return std::nullopt;
    const auto [first, last] = droppable_blocks(r.begin, r.n, bs);
    const int64_t s0 = first * bs, n = (last - first) * bs;
    // A run with no whole block, or one whose slots are no longer dense (not this context's K/V), stays as it is.
    if (n == 0 || !dense.has_kv(s0, s0 + n) || !r.master->has_kv(r.master_start + (s0 - r.begin), r.master_start + (s0 - r.begin) + n))
      continue;
    kept->drop_blocks(first, last);
    begins.push_back(s0);
    keeps.push_back(r.keep);
    specs.push_back(SegmentDiff::Spec{MasterSegment::slice(*r.master, int32_t(r.master_start + (s0 - r.begin)), n),
                                      slots_of(dense, s0), int32_t(s0), {}});
  }
  // The rows to keep are those that differ from the re-rotated master: a recomputed row that came out
  // equal to it (or an inherited one) is not stored; of an echo's, the share it keeps.
  for (size_t i = 0; i < specs.size(); ++i) {
    SegmentDiff::Spec& sp = specs[i];
    if (sp.verbatim) continue;
    auto differ = SegmentDiff::most_deviating_rows(model, *sp.master, sp.dense, sp.pos0, keeps[i], pool);
    if (!differ) return std::nullopt;
    sp.rows = std::move(*differ);
  }
  auto extracted = SegmentDiff::extract_packed(dense.manager(), std::move(specs), DiffPacking{format, &model, &pool});
  if (!extracted) return std::nullopt;
  for (size_t i = 0; i < begins.size(); ++i)
    diffs.emplace_back(begins[i], std::make_shared<const SegmentDiff>(std::move((*extracted)[i])));
  std::sort(diffs.begin(), diffs.end(), [](const PlacedDiff& a, const PlacedDiff& b) { return a.first < b.first; });
  return CompactContext(std::move(kept), std::move(diffs));
}

CompactContext CompactContext::adopt(std::shared_ptr<const KvSequence> kept, std::vector<PlacedDiff> diffs) {
  const int bs = kept->manager().block_size();
  for (const PlacedDiff& d : diffs) {
    const int64_t n = d.second->master()->n_tokens();
    AGENTKV_CHECK(d.first % bs == 0 && n % bs == 0 && d.first + n <= kept->n_tokens());
  }
  std::sort(diffs.begin(), diffs.end(), [](const PlacedDiff& a, const PlacedDiff& b) { return a.first < b.first; });
  return CompactContext(std::move(kept), std::move(diffs));
}

std::optional<KvSequence> CompactContext::expand(const Model& model, ThreadPool& pool) const {
  KvSequence s = kept_->fork();
  if (!s.fill_holes()) return std::nullopt;
  for (const auto& [begin, diff] : diffs_)
    if (!diff->materialize(model, slots_of(s, begin), pool).ok()) return std::nullopt;
  return s;
}

std::vector<CompactContext::PlacedDiff> CompactContext::diffs_within(int64_t limit) const {
  std::vector<PlacedDiff> out;
  for (const PlacedDiff& d : diffs_)
    if (d.first + d.second->master()->n_tokens() <= limit) out.push_back(d);
  return out;
}

int64_t CompactContext::own_blocks() const {
  const auto& blocks = kept_->blocks();
  int64_t n = diff_blocks();
  for (size_t i = size_t(kept_->approximate_from() / kept_->manager().block_size()); i < blocks.size(); ++i)
    n += blocks[i] != KvSequence::kHole;
  return n;
}

std::vector<const PackedKv*> CompactContext::packings() const {
  std::vector<const PackedKv*> out;
  for (const auto& [begin, diff] : diffs_)
    if (std::find(out.begin(), out.end(), diff->packed_rows()) == out.end()) out.push_back(diff->packed_rows());
  return out;
}

void CompactContext::add_block_refs(std::vector<int32_t>& out) const {
  for (const PackedKv* p : packings()) out.insert(out.end(), p->blocks().begin(), p->blocks().end());
  for (const auto& [begin, diff] : diffs_)
    for (int32_t b : diff->master()->blocks())
      if (b != KvSequence::kHole) out.push_back(b);
}

int64_t CompactContext::diff_blocks() const {
  int64_t n = 0;
  for (const PackedKv* p : packings()) n += p->n_blocks();
  return n;
}

int64_t CompactContext::diff_payload_bytes() const {
  int64_t n = 0;
  for (const PackedKv* p : packings()) n += p->payload_bytes();
  return n;
}

}  // namespace agentkv
