#include "prm/calibration_file.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/json.h"

namespace agentkv::prm {
namespace {

constexpr const char* kFormat = "agentkv-prm-calibration";
constexpr int kVersion = 2;  // 1: no probe


// Hex text, as version 1 files were written (when every JSON number here was a double).
std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// FNV-1a over the probe's numbers as stored (the JSON writer round-trips every double exactly).
std::string probe_checksum(const StepProbe& p) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  const double head[] = {double(p.layer), p.bias, p.l2};
  mix(head, sizeof head);
  mix(p.mean.data(), p.mean.size() * sizeof(float));
  mix(p.inv_std.data(), p.inv_std.size() * sizeof(float));
  mix(p.weight.data(), p.weight.size() * sizeof(double));
  return hex64(h);
}

}  // namespace

// The probe's fields under their own names (the checksum is added by the record's writer).
AGENTKV_JSON_FIELDS(StepProbe, layer, bias, l2, mean, inv_std, weight)

void to_json(Json& j, const CalibrationRecord& r) {
  j = {{"format", kFormat},
       {"version", kVersion},
       {"model_fingerprint", hex64(r.model_fingerprint)},
       {"model_name", r.model_name},
       {"question", r.question},
       {"pos_text", r.pos_text},
       {"neg_text", r.neg_text},
       {"pos_token", r.pos_token},
       {"neg_token", r.neg_token},
       {"a", r.calibration.a},
       {"b", r.calibration.b},
       {"n_train_steps", r.n_train_steps},
       {"n_train_positive", r.n_train_positive},
       {"train_auroc", r.train_auroc},
       {"train_log_loss", r.train_log_loss}};
  if (r.probe) {
    Json probe = *r.probe;
    probe["checksum"] = probe_checksum(*r.probe);
    j["probe"] = std::move(probe);
    if (std::isfinite(r.heldout_auroc)) j["heldout_auroc"] = r.heldout_auroc;
  }
}

// Reads every field but the format, version and fingerprint, which read_calibration checks first.
void from_json(const Json& j, CalibrationRecord& r) {
  j.at("model_name").get_to(r.model_name);
  j.at("question").get_to(r.question);
  j.at("pos_text").get_to(r.pos_text);
  j.at("neg_text").get_to(r.neg_text);
  j.at("a").get_to(r.calibration.a);
  j.at("b").get_to(r.calibration.b);
  j.at("train_auroc").get_to(r.train_auroc);
  j.at("train_log_loss").get_to(r.train_log_loss);
  j.at("n_train_steps").get_to(r.n_train_steps);
  j.at("n_train_positive").get_to(r.n_train_positive);
  j.at("pos_token").get_to(r.pos_token);
  j.at("neg_token").get_to(r.neg_token);
  if (const Json* p = json_member(j, "probe")) {
    r.probe = p->get<StepProbe>();
    if (const Json* h = json_member(j, "heldout_auroc"); h && h->is_number()) r.heldout_auroc = h->get<double>();
  }
}

Status write_calibration(const std::string& path, const CalibrationRecord& r) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return make_error("cannot write '" + path + "'");
  f << dump_json(r) << "\n";
  if (!f) return make_error("error writing '" + path + "'");
  return {};
}

Result<CalibrationRecord> read_calibration(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = parse_json(ss.str());
  if (!j.ok()) return make_error(j.code(), path + ": " + j.error());
  const Json* format = json_member(*j, "format");
  if (!format || *format != kFormat) return make_error(path + ": not an agentkv PRM calibration");
  const Json* version = json_member(*j, "version");
  if (!version || (*version != kVersion && *version != 1)) return make_error(path + ": unsupported version");
  auto r = json_to<CalibrationRecord>(*j, path);
  if (!r.ok()) return r;
  const Json* fp = json_member(*j, "model_fingerprint");
  const std::string fps = fp && fp->is_string() ? fp->get<std::string>() : "";
  char* end = nullptr;
  r->model_fingerprint = std::strtoull(fps.c_str(), &end, 16);
  if (fps.size() != 16 || end != fps.c_str() + fps.size()) return make_error(path + ": model_fingerprint is not 16 hex digits");
  if (r->probe) {
    const StepProbe& p = *r->probe;
    if (p.weight.empty() || p.mean.size() != p.weight.size() || p.inv_std.size() != p.weight.size())
      return make_error(path + ": probe arrays 'mean', 'inv_std', 'weight' differ in length or are empty");
    const Json* sum = json_member((*j)["probe"], "checksum");
    if (!sum || *sum != probe_checksum(p))
      return make_error(ErrorCode::kDataLoss, path + ": probe checksum mismatch (the file is corrupted or was edited)");
  }
  return r;
}

Result<VerifyHead> head_from_record(const CalibrationRecord& r, const Tokenizer& tok, uint64_t model_fingerprint,
                                    int n_embd, int n_layer) {
  if (r.model_fingerprint != model_fingerprint)
    return make_error("calibration was fitted on model " + hex64(r.model_fingerprint) + " (" + r.model_name +
                      "), not on this model (" + hex64(model_fingerprint) + ")");
  auto head = make_verify_head(tok, r.question, r.pos_text, r.neg_text);
  if (!head.ok()) return head.status_error();
  if (head->pos_token != r.pos_token || head->neg_token != r.neg_token)
    return make_error("calibration's answer tokens differ from this tokenizer's");
  head->calibration = r.calibration;
  if (r.probe) {
    if (r.probe->n_features() != n_embd)
      return make_error("calibration's probe reads " + std::to_string(r.probe->n_features()) +
                        " features, this model has " + std::to_string(n_embd));
    if (r.probe->layer < 1 || r.probe->layer > n_layer)
      return make_error("calibration's probe layer " + std::to_string(r.probe->layer) + " is outside 1.." +
                        std::to_string(n_layer));
    head->probe = r.probe;
    head->feature_layer = r.probe->layer;
    head->read_logits = false;
  }
  return head;
}

}  // namespace agentkv::prm
