// A context in master–diff form as attention reads it, without a dense per-agent copy (issue 17,
// "restore inside attention"). Slots outside the context's diffs are read from its own block table
// (holes where the diffs are, as CompactContext::kept() has them); each diff's slots are read from its
// master's blocks in place, as a master span (ops/attention_spans.h: the query is rotated back by the
// diff's position delta instead of every K row forward), with the diff's rows as overrides, decoded one
// layer at a time. Per layer only the diff rows the layer can see are decoded (from the step's lowest
// attended slot: a sliding-window layer skips every row before its window), and a lossy row's base (its
// master row re-rotated to the agent's position) is computed for those rows alone.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "model/batch.h"
#include "model/kv_arena.h"
#include "model/model.h"
#include "ops/attention_spans.h"
#include "share/master_diff.h"

namespace agentkv {

class MasterDiffAttention : public AttentionContext {
 public:
  // A diff that stands for context slots [begin, begin + diff->master()->n_tokens()).
  struct Placed {
    int64_t begin = 0;
    const SegmentDiff* diff = nullptr;
  };

  // context: the context's block table (its blocks inside the diffs are never read and may be
  // holes); diffs ascending and disjoint. The diffs (and their masters) must outlive this view.
  MasterDiffAttention(const Model& model, const KvArena& arena, SeqBlocks context, std::vector<Placed> diffs);
  // Of a context kept as CompactContext keeps it: the sequence with holes and its diffs by first slot.
  static MasterDiffAttention of(const Model& model, const KvSequence& kept,
                                const std::vector<std::pair<int64_t, std::shared_ptr<const SegmentDiff>>>& diffs);

  // Decodes the diffs' rows of layer il at context slots >= lo; spans() then describes layer il for
  // slots >= lo. Call it once per layer before that layer's attention; spans() and the buffers its
  // spans point into are read-only until the next prepare_layer, so the layer's heads and tokens may
  // attend from several threads.
  void prepare_layer(int il, int64_t lo) override;
  // Appends to `out` the spans that cover context slots [lo, hi] in the prepared layer, in order (lo
  // not below prepare_layer's): the input of attend_spans, equal up to its stated bound to attending
  // the materialized dense copy.
  void spans(int64_t lo, int64_t hi, std::vector<AttentionSpan>& out) const { spans(context_, lo, hi, out); }
  // The same for a context that grew past the table given at construction (a sequence resumed from
  // it: slots past the diffs are read from `table`).
  void spans(SeqBlocks table, int64_t lo, int64_t hi, std::vector<AttentionSpan>& out) const override;
  // All rows of the diffs (what prepare_layer decodes per layer).
  int64_t n_diff_rows() const;

 private:
  struct DiffState {
    int64_t begin = 0;
    const SegmentDiff* diff = nullptr;
    int64_t master_slot0 = 0;   // the master slot of the diff's first row
    int64_t delta = 0;          // agent position minus master position
    std::vector<int32_t> master_slots;  // the diff rows' master slots, ascending
    size_t row0 = 0;            // prepared layer: the first row decoded (rows before it are out of sight)
    std::vector<kv_t> rows;     // prepared layer: row row0 + i's K at [2 i kv_dim], its V after it
  };
  const Model& model_;
  const KvArena& arena_;
  SeqBlocks context_;
  std::vector<DiffState> diffs_;
  std::vector<float> base_;  // lossy rows' re-rotated master K, f32
  int layer_ = -1;
  int64_t lo_ = 0;  // prepared layer: the lowest slot spans() may be asked for
};

}  // namespace agentkv
