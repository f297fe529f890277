#include "prm/adapter_file.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/hex.h"

namespace agentkv::prm {
namespace {

constexpr const char* kAdapterArch = "agentkv-lora";
constexpr int64_t kAdapterFormatVersion = 1;
constexpr const char* kProjNames[kLoraProjections] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                      "ffn_gate", "ffn_up", "ffn_down"};

std::string tensor_name(int il, int p, char which) {
  return "lora.blk." + std::to_string(il) + "." + kProjNames[p] + "." + which;
}

}  // namespace

Status write_adapter_file(const std::string& path, const LoraAdapters& ad, const AdapterRecord& r) {
  GgufWriter w;
  w.add_string("general.architecture", kAdapterArch);
  w.add<uint32_t>("lora.format_version", uint32_t(kAdapterFormatVersion));
  w.add<uint64_t>("lora.model.fingerprint", r.model_fingerprint);
  w.add_string("lora.model.name", r.model_name);
  w.add<int32_t>("lora.rank", ad.rank());
  w.add<float>("lora.scale", ad.scale());
  w.add<int32_t>("lora.block_count", ad.n_layer());
  for (int p = 0; p < kLoraProjections; ++p) {
    w.add<int32_t>(std::string("lora.") + kProjNames[p] + ".in", ad.in_dim(LoraProj(p)));
    w.add<int32_t>(std::string("lora.") + kProjNames[p] + ".out", ad.out_dim(LoraProj(p)));
  }
  w.add_string("lora.verify.question", r.question);
  w.add_string("lora.verify.pos", r.pos_text);
  w.add_string("lora.verify.neg", r.neg_text);
  w.add<int64_t>("lora.train_examples", r.n_train_examples);
  w.add<double>("lora.heldout_auroc", r.heldout_auroc);
  for (int il = 0; il < ad.n_layer(); ++il)
    for (int p = 0; p < kLoraProjections; ++p) {
      const auto proj = LoraProj(p);
      const int64_t in = ad.in_dim(proj), out = ad.out_dim(proj), rank = ad.rank();
      for (const char which : {'a', 'b'}) {
        const float* src = which == 'a' ? ad.a(il, proj) : ad.b(il, proj);
        const int64_t cols = which == 'a' ? in : rank, rows = which == 'a' ? rank : out;
        std::vector<uint8_t> bytes(size_t(rows * cols) * sizeof(float));
        std::memcpy(bytes.data(), src, bytes.size());
        w.add_tensor(tensor_name(il, p, which), uint32_t(GgmlType::F32), {cols, rows}, bytes);
      }
    }
  return w.write_file_checksummed(path, "lora.checksum");
}

Result<AdapterFile> read_adapter_file(const std::string& path, const ModelConfig& cfg, uint64_t model_fingerprint) {
  const std::string where = "adapter file " + path + ": ";
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error(file.code(), where + file.error());
  const GgufFile& f = **file;
  if (f.get_string_or("general.architecture", "") != kAdapterArch)
    return make_error(where + "not an adapter file (general.architecture is not \"" + kAdapterArch + "\")");
  if (Status st = f.check_sealed_format("lora.format_version", kAdapterFormatVersion, "lora.checksum",
                                        "agentkv fit-prm --lora");
      !st.ok())
    return make_error(st.code(), where + st.error());
  AdapterRecord r;
  const GgufValue* fp = f.find("lora.model.fingerprint");
  if (!fp || fp->type != GgufValueType::U64) return make_error(where + "model fingerprint missing");
  r.model_fingerprint = fp->u;
  r.model_name = f.get_string_or("lora.model.name", "?");
  if (r.model_fingerprint != model_fingerprint)
    return make_error(ErrorCode::kConflict, where + "fitted for model " + r.model_name + " (" +
                                                hex64(r.model_fingerprint) + "), refused for model " +
                                                hex64(model_fingerprint));
  auto rank = f.get_int("lora.rank");
  if (!rank.ok()) return make_error(rank.code(), where + rank.error());
  const double scale = f.get_float_or("lora.scale", 0.0);
  if (*rank < 1 || *rank > 65536 || !(scale > 0) || !std::isfinite(scale))
    return make_error(where + "rank or scale out of range");
  LoraAdapters ad = LoraAdapters::zeros(cfg, int(*rank), float(scale));
  if (f.get_int_or("lora.block_count", -1) != cfg.n_layer)
    return make_error(where + "block count differs from the model's");
  for (int p = 0; p < kLoraProjections; ++p)
    if (f.get_int_or(std::string("lora.") + kProjNames[p] + ".in", -1) != ad.in_dim(LoraProj(p)) ||
        f.get_int_or(std::string("lora.") + kProjNames[p] + ".out", -1) != ad.out_dim(LoraProj(p)))
      return make_error(where + std::string(kProjNames[p]) + "'s shape differs from the model's");
  for (int il = 0; il < cfg.n_layer; ++il)
    for (int p = 0; p < kLoraProjections; ++p) {
      const auto proj = LoraProj(p);
      for (const char which : {'a', 'b'}) {
        const std::string name = tensor_name(il, p, which);
        const int64_t cols = which == 'a' ? ad.in_dim(proj) : ad.rank();
        const int64_t rows = which == 'a' ? ad.rank() : ad.out_dim(proj);
        const GgufTensorInfo* t = f.tensor(name);
        if (!t || t->type != uint32_t(GgmlType::F32) || t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
          return make_error(where + "tensor " + name + " missing or of the wrong type or shape");
        float* dst = which == 'a' ? ad.a(il, proj) : ad.b(il, proj);
        std::memcpy(dst, t->data, size_t(rows * cols) * sizeof(float));
      }
    }
  for (float x : ad.params())
    if (!std::isfinite(x)) return make_error(where + "a parameter is not finite");
  r.question = f.get_string_or("lora.verify.question", "");
  r.pos_text = f.get_string_or("lora.verify.pos", "+");
  r.neg_text = f.get_string_or("lora.verify.neg", "-");
  r.n_train_examples = f.get_int_or("lora.train_examples", 0);
  r.heldout_auroc = f.get_float_or("lora.heldout_auroc", 0.0);
  return AdapterFile{std::move(ad), std::move(r)};
}

Result<VerifyHead> head_from_adapter_file(AdapterFile file, const Tokenizer& tok) {
  auto head = make_verify_head(tok, file.record.question, file.record.pos_text, file.record.neg_text);
  if (!head.ok()) return make_error("adapter file: " + head.error());
  head->read_logits = true;
  head->adapters = std::make_shared<const LoraAdapters>(std::move(file.adapters));
  return head;
}

}  // namespace agentkv::prm
