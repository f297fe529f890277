// How a master–diff stores one recomputed token's K/V (issue 17: smaller per-agent diffs). A diff row
// is what the agent's dense copy holds where it differs from the master re-rotated to the agent's
// positions (the base). Lossless rows keep the dense values themselves (f16, bit for bit); lossy rows
// keep only the difference from the base, quantized per head with one f32 scale each, so a row costs
// about a half (int8) or a quarter (int4) of its f16 size. Restoring adds the decoded difference to
// the base and rounds to f16. The bound, per element of head h:
//   |restored - dense| <= scale_h / 2 + half an f16 ulp of restored
// (plus f32 rounding of the sum, under 2^-10 of the second term: error_bound() includes it).
// A head whose difference is zero has scale 0 and restores to the base exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ops/attention.h"
#include "util/status.h"

namespace agentkv {

enum class DiffFormat : uint8_t { kF16, kInt8, kInt4 };

std::string_view diff_format_name(DiffFormat f);  // "f16", "int8", "int4"
// An error names the text and the choices.
Result<DiffFormat> parse_diff_format(std::string_view text);
inline bool diff_format_lossless(DiffFormat f) { return f == DiffFormat::kF16; }

// One format for one geometry. A row (one token's K and V in every layer) is a record of
// record_bytes(): 2 * n_layer vectors (layer l's K, then its V) of vector_bytes() each.
class KvRowCodec {
 public:
  KvRowCodec(DiffFormat format, int n_layer, int kv_dim, int head_dim);

  DiffFormat format() const { return format_; }
  size_t vector_bytes() const { return vector_bytes_; }
  size_t record_bytes() const { return 2 * size_t(n_layer_) * vector_bytes_; }
  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }

  // Writes kv_dim values of `dense` as vector_bytes() bytes at `out`; `base` (the re-rotated master's
  // values at the same place) is read by lossy formats only and may be null for a lossless one.
  void encode(const kv_t* dense, const kv_t* base, uint8_t* out) const;
  // The inverse: `inout` holds the base on entry (lossy formats) and the restored values on return.
  void decode(const uint8_t* in, kv_t* inout) const;
  // Head h's scale in an encoded vector (0 for a lossless format).
  float scale(const uint8_t* in, int h) const;
  // The largest |restored - dense| the format allows for an element of a head with scale `scale`
  // restored to `restored` (0 for a lossless format).
  float error_bound(float scale, kv_t restored) const;

 private:
  DiffFormat format_;
  int n_layer_, kv_dim_, head_dim_, n_head_;
  int qmax_ = 0;  // largest quantized magnitude (lossy)
  size_t vector_bytes_ = 0;
};

}  // namespace agentkv
