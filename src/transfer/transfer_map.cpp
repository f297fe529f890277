#include "transfer/transfer_map.h"

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdint>
#include <cstring>

#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "ops/matmul.h"
#include "util/hex.h"

namespace agentkv {

namespace {

constexpr const char* kTransferArch = "agentkv-transfer";
constexpr uint32_t kTransferFormatVersion = 2;  // 1: the checksum covered the weights only

constexpr const char* kCountsTensor = "transfer.receiver_token_counts";

std::string layer_tensor_name(int l) { return "transfer.blk." + std::to_string(l) + ".w"; }

}  // namespace

void count_tokens(const Tokenizer& tokenizer, std::string_view text, std::vector<uint32_t>& counts) {
  if (counts.empty()) counts.assign(size_t(tokenizer.n_vocab()), 0);
  for (int32_t t : tokenizer.encode(text, false, false))
    if (t >= 0 && size_t(t) < counts.size() && counts[size_t(t)] < UINT32_MAX) ++counts[size_t(t)];
}

std::vector<float> transpose_matrix(const std::vector<float>& a, int rows, int cols) {
  std::vector<float> t(a.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * size_t(rows) + size_t(r)] = a[size_t(r) * size_t(cols) + size_t(c)];
  return t;
}

void TransferMap::project(int receiver_layer, const float* x, float* y) const {
  const int n = in_dim(), m = out_dim();
  const float* w = weights[size_t(receiver_layer)].data();
  for (int j = 0; j < m; ++j) {
    const float* wj = w + int64_t(j) * n;
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += wj[i] * x[i];
    y[j] = s;
  }
}

void TransferMap::project_rows(int receiver_layer, const float* x, int64_t n, float* y, ThreadPool& pool) const {
  const WeightView w{GgmlType::F32, in_dim(), out_dim(), weights[size_t(receiver_layer)].data(),
                     size_t(in_dim()) * sizeof(float)};
  matmul(w, x, n, y, pool);
}

Status TransferMap::validate() const {
  if (sender_n_layer <= 0 || receiver_n_layer <= 0 || sender_kv_dim <= 0 || receiver_kv_dim <= 0)
    return make_error("transfer map: layer counts and KV widths must be positive");
  if (int(sender_layer.size()) != receiver_n_layer)
    return make_error("transfer map: layer map has " + std::to_string(sender_layer.size()) + " entries, the receiver has " +
                      std::to_string(receiver_n_layer) + " layers");
  if (sender_window < 1 || sender_window > sender_n_layer)
    return make_error("transfer map: a window of " + std::to_string(sender_window) + " sender layers, the sender has " +
                      std::to_string(sender_n_layer));
  for (int32_t s : sender_layer)
    if (s < 0 || s + sender_window > sender_n_layer)
      return make_error("transfer map: sender layer " + std::to_string(s) +
                        (sender_window > 1 ? " (window of " + std::to_string(sender_window) + ")" : std::string()) +
                        " out of range");
  if (receiver_hidden_layers < 0 || receiver_hidden_layers >= receiver_n_layer || receiver_hidden_dim < 0 ||
      (receiver_hidden_layers > 0) != (receiver_hidden_dim > 0))
    return make_error("transfer map: receiver hidden-state conditioning (" + std::to_string(receiver_hidden_layers) +
                      " layers, width " + std::to_string(receiver_hidden_dim) + ") is inconsistent");
  if (int(weights.size()) != receiver_n_layer) return make_error("transfer map: wrong number of weight matrices");
  for (size_t l = 0; l < weights.size(); ++l)
    if (weights[l].size() != size_t(in_dim()) * size_t(out_dim()))
      return make_error("transfer map: weight matrix of receiver layer " + std::to_string(l) + " has the wrong size");
  return Status::ok_status();
}

std::vector<int32_t> depth_proportional_layers(int receiver_n_layer, int sender_n_layer) {
  std::vector<int32_t> out(size_t(receiver_n_layer), 0);
  for (int l = 0; l < receiver_n_layer; ++l) {
    const double frac = receiver_n_layer > 1 ? double(l) / double(receiver_n_layer - 1) : 0.0;
    out[size_t(l)] = int32_t(std::lround(frac * double(sender_n_layer - 1)));
  }
  return out;
}

std::vector<int32_t> sender_layer_windows(int receiver_n_layer, int sender_n_layer, int window) {
  std::vector<int32_t> out = depth_proportional_layers(receiver_n_layer, sender_n_layer);
  const int w = std::clamp(window, 1, std::max(1, sender_n_layer));
  for (int32_t& s : out) s = std::clamp(s - (w - 1) / 2, 0, sender_n_layer - w);
  return out;
}

Status save_transfer_map(const TransferMap& map, const std::string& path) {
  AGENTKV_TRY(map.validate());
  GgufWriter w;
  w.add_string("general.architecture", kTransferArch);
  w.add<uint32_t>("transfer.format_version", kTransferFormatVersion);
  w.add<uint64_t>("transfer.sender.fingerprint", map.sender_fingerprint);
  w.add<uint64_t>("transfer.receiver.fingerprint", map.receiver_fingerprint);
  w.add_string("transfer.sender.name", map.sender_name);
  w.add_string("transfer.receiver.name", map.receiver_name);
  w.add<int32_t>("transfer.sender.block_count", map.sender_n_layer);
  w.add<int32_t>("transfer.sender.kv_dim", map.sender_kv_dim);
  w.add<int32_t>("transfer.receiver.block_count", map.receiver_n_layer);
  w.add<int32_t>("transfer.receiver.kv_dim", map.receiver_kv_dim);
  w.add_array<int32_t>("transfer.sender_layer", map.sender_layer);
  // Only a window writes the key, so one-layer maps keep the bytes they always had.
  if (map.sender_window != 1) w.add<int32_t>("transfer.sender_window", map.sender_window);
  w.add<double>("transfer.ridge_alpha", map.ridge_alpha);
  if (map.receiver_hidden_layers > 0) {
    w.add<int32_t>("transfer.receiver.hidden_layers", map.receiver_hidden_layers);
    w.add<int32_t>("transfer.receiver.hidden_dim", map.receiver_hidden_dim);
  }
  if (!map.layer_alpha.empty()) {
    const std::vector<float> alphas(map.layer_alpha.begin(), map.layer_alpha.end());
    w.add_array<float>("transfer.layer_alpha", alphas);
  }
  w.add_string("transfer.pooling", std::string(span_pooling_name(map.pooling)));
  w.add<int64_t>("transfer.fit_tokens", map.n_fit_tokens);
  std::vector<std::vector<float>> file_weights;
  for (const auto& m : map.weights) file_weights.push_back(transpose_matrix(m, map.out_dim(), map.in_dim()));
  if (!map.receiver_token_counts.empty()) {
    std::vector<uint8_t> bytes(map.receiver_token_counts.size() * sizeof(int32_t));
    for (size_t i = 0; i < map.receiver_token_counts.size(); ++i) {
      const int32_t c = int32_t(std::min<uint32_t>(map.receiver_token_counts[i], uint32_t(INT32_MAX)));
      std::memcpy(bytes.data() + i * sizeof(int32_t), &c, sizeof(c));
    }
    w.add_tensor(kCountsTensor, uint32_t(GgmlType::I32), {int64_t(map.receiver_token_counts.size())}, bytes);
  }
  for (int l = 0; l < map.receiver_n_layer; ++l) {
    const auto& m = file_weights[size_t(l)];
    std::vector<uint8_t> bytes(m.size() * sizeof(float));
    std::memcpy(bytes.data(), m.data(), bytes.size());
    w.add_tensor(layer_tensor_name(l), uint32_t(GgmlType::F32), {map.out_dim(), map.in_dim()}, bytes);
  }
  return w.write_file_checksummed(path, "transfer.checksum");
}

Result<TransferMap> read_transfer_map(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error(file.code(), "transfer map " + path + ": " + file.error());
  const GgufFile& f = **file;
  const std::string where = "transfer map " + path + ": ";
  if (f.get_string_or("general.architecture", "") != kTransferArch)
    return make_error(where + "not a transfer map (general.architecture is not \"" + kTransferArch + "\")");
  if (Status st = f.check_sealed_format("transfer.format_version", kTransferFormatVersion, "transfer.checksum",
                                        "agentkv fit-transfer");
      !st.ok())
    return make_error(st.code(), where + st.error());
  TransferMap map;
  auto need_int = [&](const char* key) -> Result<int64_t> {
    auto v = f.get_int(key);
    if (!v.ok()) return make_error(v.code(), where + v.error());
    return *v;
  };
  const GgufValue* sf = f.find("transfer.sender.fingerprint");
  const GgufValue* rf = f.find("transfer.receiver.fingerprint");
  if (!sf || !rf || sf->type != GgufValueType::U64 || rf->type != GgufValueType::U64)
    return make_error(where + "fingerprints missing");
  map.sender_fingerprint = sf->u;
  map.receiver_fingerprint = rf->u;
  map.sender_name = f.get_string_or("transfer.sender.name", "?");
  map.receiver_name = f.get_string_or("transfer.receiver.name", "?");
  int64_t v = 0;
  AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.sender.block_count"));
  map.sender_n_layer = int(v);
  AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.sender.kv_dim"));
  map.sender_kv_dim = int(v);
  AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.receiver.block_count"));
  map.receiver_n_layer = int(v);
  AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.receiver.kv_dim"));
  map.receiver_kv_dim = int(v);
  AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.fit_tokens"));
  map.n_fit_tokens = v;
  map.ridge_alpha = f.get_float_or("transfer.ridge_alpha", 0.0);
  if (f.find("transfer.sender_window")) {
    AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.sender_window"));
    if (v < 1 || v > 4096) return make_error(where + "implausible sender window " + std::to_string(v));
    map.sender_window = int(v);
  }
  if (f.find("transfer.receiver.hidden_layers")) {
    AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.receiver.hidden_layers"));
    map.receiver_hidden_layers = int(v);
    AGENTKV_ASSIGN_OR_RETURN(v, need_int("transfer.receiver.hidden_dim"));
    map.receiver_hidden_dim = int(v);
  }
  if (f.find("transfer.layer_alpha")) {
    auto alphas = f.get_float_array("transfer.layer_alpha");
    if (!alphas.ok()) return make_error(where + alphas.error());
    if (int64_t(alphas->size()) != map.receiver_n_layer) return make_error(where + "transfer.layer_alpha is not one per receiver layer");
    map.layer_alpha.assign(alphas->begin(), alphas->end());
  }
  // Maps written before the pooling rules existed were all fitted on the mean.
  const std::string pooling = f.get_string_or("transfer.pooling", "mean");
  const auto parsed = parse_span_pooling(pooling);
  if (!parsed) return make_error(where + "unknown pooling \"" + pooling + "\"");
  map.pooling = *parsed;
  auto layers = f.get_int_array("transfer.sender_layer");
  if (!layers.ok()) return make_error(layers.code(), where + layers.error());
  map.sender_layer = *layers;
  if (map.receiver_n_layer <= 0 || map.receiver_n_layer > 4096 || map.sender_kv_dim <= 0 || map.sender_kv_dim > 65536 ||
      map.receiver_kv_dim <= 0 || map.receiver_kv_dim > 65536 || map.receiver_hidden_dim < 0 ||
      map.receiver_hidden_dim > 65536)
    return make_error(where + "implausible geometry");
  for (int l = 0; l < map.receiver_n_layer; ++l) {
    const GgufTensorInfo* t = f.tensor(layer_tensor_name(l));
    if (!t) return make_error(where + "tensor " + layer_tensor_name(l) + " missing");
    if (t->type != uint32_t(GgmlType::F32) || t->ne[0] != map.out_dim() || t->ne[1] != map.in_dim() || t->n_dims != 2)
      return make_error(where + "tensor " + layer_tensor_name(l) + " has the wrong type or shape");
    std::vector<float> w(size_t(map.in_dim()) * size_t(map.out_dim()));
    std::memcpy(w.data(), t->data, w.size() * sizeof(float));
    map.weights.push_back(std::move(w));
  }
  if (const GgufTensorInfo* t = f.tensor(kCountsTensor)) {
    if (t->type != uint32_t(GgmlType::I32) || t->n_dims != 1 || t->ne[0] <= 0 || t->ne[0] > (int64_t(1) << 24))
      return make_error(where + "tensor " + kCountsTensor + " has the wrong type or shape");
    map.receiver_token_counts.resize(size_t(t->ne[0]));
    for (size_t i = 0; i < map.receiver_token_counts.size(); ++i) {
      int32_t c = 0;
      std::memcpy(&c, static_cast<const uint8_t*>(t->data) + i * sizeof(int32_t), sizeof(c));
      if (c < 0) return make_error(where + "negative token count in " + kCountsTensor);
      map.receiver_token_counts[i] = uint32_t(c);
    }
  }
  AGENTKV_TRY(map.validate());
  for (auto& w : map.weights) w = transpose_matrix(w, map.in_dim(), map.out_dim());
  for (const auto& w : map.weights)
    for (float x : w)
      if (!std::isfinite(x)) return make_error(where + "non-finite weight");
  return map;
}

Status check_transfer_pair(const TransferMap& map, const LoadedModel& sender, const LoadedModel& receiver) {
  if (map.sender_fingerprint != sender.fingerprint || map.receiver_fingerprint != receiver.fingerprint)
    return make_error("transfer map was fitted for " + map.sender_name + " (" + hex64(map.sender_fingerprint) + ") -> " +
                      map.receiver_name + " (" + hex64(map.receiver_fingerprint) + "), refused for " + sender.name + " (" +
                      hex64(sender.fingerprint) + ") -> " + receiver.name + " (" + hex64(receiver.fingerprint) + ")");
  if (map.sender_n_layer != sender.config().n_layer || map.sender_kv_dim != sender.config().kv_dim() ||
      map.receiver_n_layer != receiver.config().n_layer || map.receiver_kv_dim != receiver.config().kv_dim() ||
      (map.receiver_hidden_layers > 0 && map.receiver_hidden_dim != receiver.config().n_embd))
    return make_error("transfer map geometry does not match the models");
  if (!map.receiver_token_counts.empty() && map.receiver_token_counts.size() != size_t(receiver.config().n_vocab))
    return make_error("transfer map's token counts cover " + std::to_string(map.receiver_token_counts.size()) +
                      " token ids, the receiver has " + std::to_string(receiver.config().n_vocab));
  return Status::ok_status();
}

Result<TransferMap> load_transfer_map(const std::string& path, const LoadedModel& sender, const LoadedModel& receiver) {
  TransferMap map;
  AGENTKV_ASSIGN_OR_RETURN(map, read_transfer_map(path));
  AGENTKV_TRY(check_transfer_pair(map, sender, receiver));
  return map;
}

}  // namespace agentkv
