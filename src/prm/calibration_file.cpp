#include "prm/calibration_file.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "util/fnv_hash.h"
#include "util/hex.h"
#include "util/input_file.h"
#include "util/json.h"

namespace agentkv::prm {
namespace {

constexpr const char* kFormat = "agentkv-prm-calibration";
// 1: no probe; 2: a checksum over the probe only (an edited question passed); 3: over every field.
constexpr int kVersion = 3;

// FNV-1a over the compact text of the record without its "checksum" member: every field, in file
// order, names included. The JSON writer round-trips every number exactly, so the text parsed back
// dumps to the same bytes, and only a change of layout (whitespace) leaves the sum unchanged.
std::string record_checksum(Json j) {
  j.erase("checksum");
  const std::string text = dump_json(j);
  Fnv1a h;
  h.mix(text.data(), text.size());
  return hex64(h.value());
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
    j["probe"] = *r.probe;
    if (std::isfinite(r.heldout_auroc)) j["heldout_auroc"] = r.heldout_auroc;
  }
  j["checksum"] = record_checksum(j);
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
  std::string text;
  AGENTKV_ASSIGN_OR_RETURN(text, read_input_file(path, kMaxCalibrationBytes, "PRM calibration"));
  auto j = parse_json(text);
  if (!j.ok()) return make_error(j.code(), path + ": " + j.error());
  if (!j->is_object()) return make_error(path + ": not an agentkv PRM calibration (not a JSON object)");
  const Json* format = json_member(*j, "format");
  if (!format || *format != kFormat) return make_error(path + ": not an agentkv PRM calibration");
  const Json* version = json_member(*j, "version");
  if (version && version->is_number_integer() && (*version == 1 || *version == 2))
    return make_error(path + ": written by an older agentkv (calibration version " + version->dump() +
                      ", whose checksum did not cover every field); re-create it with agentkv fit-prm");
  if (!version || *version != kVersion) return make_error(path + ": unsupported version");
  // Fields first, so a file missing one says which; then the checksum over all of them.
  auto r = json_to<CalibrationRecord>(*j, path);
  if (!r.ok()) return r;
  const Json* sum = json_member(*j, "checksum");
  if (!sum || !sum->is_string() || *sum != record_checksum(*j))
    return make_error(ErrorCode::kDataLoss, path + ": checksum mismatch (the file is corrupted or was edited)");
  const Json* fp = json_member(*j, "model_fingerprint");
  const std::string fps = fp && fp->is_string() ? fp->get<std::string>() : "";
  char* end = nullptr;
  r->model_fingerprint = std::strtoull(fps.c_str(), &end, 16);
  if (fps.size() != 16 || end != fps.c_str() + fps.size()) return make_error(path + ": model_fingerprint is not 16 hex digits");
  if (r->probe) {
    const StepProbe& p = *r->probe;
    if (p.weight.empty() || p.mean.size() != p.weight.size() || p.inv_std.size() != p.weight.size())
      return make_error(path + ": probe arrays 'mean', 'inv_std', 'weight' differ in length or are empty");
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
