#include "transfer/kv_cache_file.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/hex.h"

namespace agentkv {

namespace {

constexpr const char* kKvCacheArch = "agentkv-kvcache";
constexpr uint32_t kKvCacheFormatVersion = 2;  // 1: the checksum covered tokens, text and K/V only

std::string tensor_name(int layer, char kv) { return "kvcache.blk." + std::to_string(layer) + "." + kv; }

// Row t of layer il's K (kv = 'k') or V in the arena: kv_dim f16 values.
kv_t* arena_row(const KvArena& arena, std::span<const int32_t> table, int il, char kv, int64_t t) {
  const PagedKvLayer layer = arena.layer(il);
  const int bs = arena.block_size();
  const int32_t block = table[size_t(t / bs)];
  return kv == 'k' ? layer.k(block, int(t % bs)) : layer.v(block, int(t % bs));
}

}  // namespace

Status save_kv_cache_file(const std::string& path, const LoadedModel& lm, const KvManager& kv, const KvSequence& seq,
                          std::string_view text) {
  if (kv.pool().fingerprint() != lm.fingerprint) return make_error("kv cache file: the cache belongs to another model than " + lm.name);
  const std::vector<int32_t> expect = lm.tokenizer->encode(text, lm.tokenizer->add_bos_default(), false);
  if (seq.tokens() != expect) return make_error("kv cache file: the sequence is not " + lm.name + "'s tokenization of the text");
  if (seq.n_tokens() == 0) return make_error("kv cache file: the sequence is empty");
  const ModelConfig& cfg = lm.config();
  const int64_t n = seq.n_tokens();
  const size_t row_bytes = size_t(cfg.kv_dim()) * sizeof(kv_t);
  std::vector<std::vector<uint8_t>> tensors;
  for (int il = 0; il < cfg.n_layer; ++il)
    for (char which : {'k', 'v'}) {
      std::vector<uint8_t> bytes(size_t(n) * row_bytes);
      for (int64_t t = 0; t < n; ++t)
        std::memcpy(bytes.data() + size_t(t) * row_bytes, arena_row(kv.arena(), seq.blocks(), il, which, t), row_bytes);
      tensors.push_back(std::move(bytes));
    }
  GgufWriter w;
  w.add_string("general.architecture", kKvCacheArch);
  w.add<uint32_t>("kvcache.format_version", kKvCacheFormatVersion);
  w.add<uint64_t>("kvcache.model.fingerprint", lm.fingerprint);
  w.add_string("kvcache.model.name", lm.name);
  w.add<int32_t>("kvcache.block_count", cfg.n_layer);
  w.add<int32_t>("kvcache.kv_dim", cfg.kv_dim());
  w.add_array<int32_t>("kvcache.tokens", seq.tokens());
  w.add_string("kvcache.text", std::string(text));
  for (int il = 0; il < cfg.n_layer; ++il)
    for (int j = 0; j < 2; ++j)
      w.add_tensor(tensor_name(il, j ? 'v' : 'k'), uint32_t(GgmlType::F16), {cfg.kv_dim(), n},
                   tensors[size_t(2 * il + j)]);
  return w.write_file_checksummed(path, "kvcache.checksum");
}

Result<std::string> load_kv_cache_file(const std::string& path, const LoadedModel& lm, KvManager& kv, KvSequence& seq) {
  const std::string where = "kv cache file " + path + ": ";
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error(file.code(), where + file.error());
  const GgufFile& f = **file;
  if (f.get_string_or("general.architecture", "") != kKvCacheArch)
    return make_error(where + "not a kv cache file (general.architecture is not \"" + kKvCacheArch + "\")");
  if (Status st = f.check_sealed_format("kvcache.format_version", kKvCacheFormatVersion, "kvcache.checksum", "agentkv kv-save");
      !st.ok())
    return make_error(st.code(), where + st.error());
  const GgufValue* fp = f.find("kvcache.model.fingerprint");
  if (!fp || fp->type != GgufValueType::U64) return make_error(where + "kvcache.model.fingerprint (U64) missing");
  const std::string made_by = f.get_string_or("kvcache.model.name", "?");
  if (fp->u != lm.fingerprint)
    return make_error(where + "written by " + made_by + " (" + hex64(fp->u) + "), refused for " + lm.name + " (" +
                      hex64(lm.fingerprint) + ")");
  const ModelConfig& cfg = lm.config();
  if (f.get_int_or("kvcache.block_count", -1) != cfg.n_layer || f.get_int_or("kvcache.kv_dim", -1) != cfg.kv_dim())
    return make_error(where + "geometry does not match " + lm.name);
  auto tokens = f.get_int_array("kvcache.tokens");
  if (!tokens.ok()) return make_error(tokens.code(), where + tokens.error());
  auto text = f.get_string("kvcache.text");
  if (!text.ok()) return make_error(text.code(), where + text.error());
  const int64_t n = int64_t(tokens->size());
  if (n == 0) return make_error(where + "no tokens");
  const size_t row_bytes = size_t(cfg.kv_dim()) * sizeof(kv_t);
  std::vector<const GgufTensorInfo*> tensors;
  for (int il = 0; il < cfg.n_layer; ++il)
    for (char which : {'k', 'v'}) {
      const GgufTensorInfo* t = f.tensor(tensor_name(il, which));
      if (!t || t->type != uint32_t(GgmlType::F16) || t->n_dims != 2 || t->ne[0] != cfg.kv_dim() || t->ne[1] != n)
        return make_error(where + "tensor " + tensor_name(il, which) + " missing or of the wrong type or shape");
      tensors.push_back(t);
    }
  if (*tokens != lm.tokenizer->encode(*text, lm.tokenizer->add_bos_default(), false))
    return make_error(where + "its tokens are not " + lm.name + "'s tokenization of its text");
  if (seq.n_tokens() != 0) return make_error("kv cache file: the sequence to load into must be empty");
  if (!seq.reserve(n)) return make_error(ErrorCode::kResourceExhausted, where + "KV budget too small for " + std::to_string(n) + " tokens");
  for (int il = 0; il < cfg.n_layer; ++il)
    for (int j = 0; j < 2; ++j) {
      const uint8_t* src = tensors[size_t(2 * il + j)]->data;
      for (int64_t t = 0; t < n; ++t)
        std::memcpy(arena_row(kv.arena(), seq.blocks(), il, j ? 'v' : 'k', t), src + size_t(t) * row_bytes, row_bytes);
    }
  seq.commit(*tokens);
  return *text;
}

}  // namespace agentkv
