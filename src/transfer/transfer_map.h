// A fitted sender → receiver KV projection and its file. For every receiver layer l the map holds
// one matrix W_l (out_dim x in_dim): the receiver's un-rotated K and V of a token (out, [K | V])
// are W_l x, where x is the pooled un-rotated K and V of the aligned sender tokens at sender
// layers sender_layer[l] .. sender_layer[l] + sender_window - 1 (one layer unless the fit asked
// for a window: neighbouring sender layers hold what one alone does not), followed by a constant 1 (the bias column) and, for a map conditioned on
// the receiver's first layers, the receiver's own hidden state after them (paired_features.h): the
// receiver has the text, so it runs those layers itself and the map predicts the deeper K/V from
// both what the sender read and what the receiver's own early layers say about the token. In memory W_l is one row per
// output, the layout of the engine's F32 matmul kernels; the file keeps the ridge's [in][out]. Columns of one receiver KV head
// are an independent ridge regression, so this is the per-layer-and-head map of issue 6.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/loaded_model.h"
#include "transfer/paired_features.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

struct TransferMap {
  uint64_t sender_fingerprint = 0, receiver_fingerprint = 0;
  std::string sender_name, receiver_name;  // informational (error messages)
  int sender_n_layer = 0, sender_kv_dim = 0;
  int receiver_n_layer = 0, receiver_kv_dim = 0;
  // > 0: conditioned on the receiver's hidden state (receiver_hidden_dim = its n_embd) after its
  // first receiver_hidden_layers layers, which it computes natively for every token; the map's
  // matrices of those layers are never applied. 0: the sender's K/V alone.
  int receiver_hidden_layers = 0, receiver_hidden_dim = 0;
  std::vector<int32_t> sender_layer;  // per receiver layer: the first sender layer it reads
  // Consecutive sender layers read per receiver layer (their pooled K/V side by side in x). Files
  // without the key were fitted on one.
  int sender_window = 1;
  double ridge_alpha = 0;
  // Per receiver layer when the fit chose each layer's ridge by held-out error (empty: ridge_alpha
  // for all). Informational, like ridge_alpha: applying the map does not read it.
  std::vector<double> layer_alpha;
  SpanPooling pooling = SpanPooling::mean;  // how features were pooled at fitting; applying must match
  int64_t n_fit_tokens = 0;           // receiver tokens the map was fitted on
  // How often each receiver token id occurs in the fitting text (n_vocab counts; empty in maps fitted
  // before they were kept): a hybrid by rarity recomputes the tokens the map saw least
  // (KvTransferOptions::rare_share).
  std::vector<uint32_t> receiver_token_counts;
  std::vector<std::vector<float>> weights;  // per receiver layer, row-major [out_dim][in_dim]

  int sender_in_dim() const { return sender_window * 2 * sender_kv_dim + 1; }  // sender K/V and the bias
  int in_dim() const { return sender_in_dim() + receiver_hidden_dim; }
  int out_dim() const { return 2 * receiver_kv_dim; }
  // y[out_dim] = W_l x[in_dim] (x ends with the constant 1). Scalar: the reference for project_rows.
  void project(int receiver_layer, const float* x, float* y) const;
  // n rows at once (x: n x in_dim, y: n x out_dim) through the dispatched (AVX2 / AVX-512) tiled
  // F32 matmul on the pool's threads.
  void project_rows(int receiver_layer, const float* x, int64_t n, float* y, ThreadPool& pool) const;
  // Structural consistency (sizes, layer indices); a message names the first problem.
  Status validate() const;
};

// Adds each token's occurrences in `text` (tokenized without BOS or special tokens) to counts, which is
// sized to the tokenizer's vocabulary first when empty.
void count_tokens(const Tokenizer& tokenizer, std::string_view text, std::vector<uint32_t>& counts);

// rows x cols row-major -> cols x rows row-major. The file stores each W_l as [in][out] (the
// ridge's solution layout, format version 1); memory holds [out][in] for the matmul kernels.
std::vector<float> transpose_matrix(const std::vector<float>& a, int rows, int cols);

// Depth-proportional layer map: receiver layer l reads sender layer round(l (Ls-1) / (Lr-1)), so
// first maps to first and last to last.
std::vector<int32_t> depth_proportional_layers(int receiver_n_layer, int sender_n_layer);
// The first layer of each receiver layer's window of `window` consecutive sender layers: centred on
// the depth-proportional layer (an even window reaches one layer further after it than before it),
// moved inwards at either end. Window 1 is depth_proportional_layers.
std::vector<int32_t> sender_layer_windows(int receiver_n_layer, int sender_n_layer, int window);

// GGUF file (general.architecture = "agentkv-transfer"): metadata records both fingerprints and
// geometry, one F32 tensor per receiver layer, and a checksum over every byte of the file (format
// version 2; version 1's covered the weights only), so a damaged or edited file is refused even
// where the GGUF structure still parses.
Status save_transfer_map(const TransferMap& map, const std::string& path);
// Reads and checks the file itself (format, sizes, checksum); says nothing about the models.
Result<TransferMap> read_transfer_map(const std::string& path);
// A map is only valid for the exact pair it was fitted on: refuses any other sender or receiver
// (fingerprints differ) with a message naming both sides.
Status check_transfer_pair(const TransferMap& map, const LoadedModel& sender, const LoadedModel& receiver);
// read_transfer_map + check_transfer_pair.
Result<TransferMap> load_transfer_map(const std::string& path, const LoadedModel& sender, const LoadedModel& receiver);

}  // namespace agentkv
