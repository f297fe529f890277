// One forward step: tokens of several sequences at once (prefill chunks and decode tokens mixed).
#pragma once

#include <cstdint>
#include <vector>

namespace agentkv {

class LoraAdapters;
struct AttentionSpan;

// A sequence's view of the KV arena: its block table. Slot s of the sequence lives in block
// table[s / block_size] at offset s % block_size.
struct SeqBlocks {
  const int32_t* table = nullptr;
  int32_t n_blocks = 0;
};

// A sequence whose context attention reads as spans (ops/attention_spans.h) instead of its block table
// alone: a context resumed in master–diff form (share/master_diff_attention.h), whose shared runs are
// read from their masters in place. Its blocks there are holes; every slot past them is the table's.
class AttentionContext {
 public:
  virtual ~AttentionContext() = default;
  // Called once per layer, before that layer's attention reads spans() (from several threads). lo: the
  // lowest slot any of the step's tokens attends in layer il (a sliding-window layer's window start), so
  // nothing the layer cannot see need be prepared; spans() is then asked for slots >= lo only.
  virtual void prepare_layer(int il, int64_t lo) = 0;
  // The spans covering slots [lo, hi] of the sequence whose block table is now `table`, in order.
  virtual void spans(SeqBlocks table, int64_t lo, int64_t hi, std::vector<AttentionSpan>& out) const = 0;
};

struct Batch {
  // Per token.
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;  // RoPE position
  std::vector<int32_t> seq;        // index into seqs
  std::vector<int32_t> slots;      // KV slot within the sequence; attends to slots <= its own
  // Per sequence.
  std::vector<SeqBlocks> seqs;
  // Empty, or one per sequence: its context's spans (nullptr: the block table alone).
  std::vector<AttentionContext*> contexts;
  // Token indices whose logits are wanted, in the order they are written to the output.
  std::vector<int32_t> logit_rows;
  // -1: matmul kernels are chosen by batch size (fastest for one sequence). >= 0: batch-invariant
  // mode (see ops/matmul.h): tokens [0, n_tile_tokens) use the decode kernels, the rest the prefill
  // kernels, so each token's numerics are independent of the batch. The serving engine puts
  // generated tokens first and prompt tokens after; logit rows of the first group come first.
  int64_t n_tile_tokens = -1;
  // Optional low-rank adapters (model/lora_adapters.h), applied to the logit-row tokens only: a
  // verifier's verify tokens, whose outputs are the ones read. Every other token of the pass, and the
  // K/V it writes, comes from the base weights. Null: none.
  const LoraAdapters* adapters = nullptr;

  void clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    slots.clear();
    seqs.clear();
    contexts.clear();
    logit_rows.clear();
    n_tile_tokens = -1;
    adapters = nullptr;
  }
  void add(int32_t token, int32_t pos, int32_t seq_index, int32_t slot, bool want_logits) {
    if (want_logits) logit_rows.push_back(int32_t(tokens.size()));
    tokens.push_back(token);
    positions.push_back(pos);
    seq.push_back(seq_index);
    slots.push_back(slot);
  }
  int64_t size() const { return int64_t(tokens.size()); }
};

}  // namespace agentkv
