#include "prm/calibration_file.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/json.h"

namespace agentkv::prm {
namespace {

constexpr const char* kFormat = "agentkv-prm-calibration";
constexpr int kVersion = 1;

// Hex text: a JSON number (a double) cannot hold every 64-bit fingerprint.
std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

Result<const Json*> member(const Json& j, const char* key, Json::Type type) {
  const Json* m = j.get(key);
  if (!m || m->type() != type) return make_error(std::string("calibration file: field '") + key + "' missing or of the wrong type");
  return m;
}

}  // namespace

Status write_calibration(const std::string& path, const CalibrationRecord& r) {
  Json j = Json::object();
  j.set("format", Json::string(kFormat));
  j.set("version", Json::number(kVersion));
  j.set("model_fingerprint", Json::string(hex64(r.model_fingerprint)));
  j.set("model_name", Json::string(r.model_name));
  j.set("question", Json::string(r.question));
  j.set("pos_text", Json::string(r.pos_text));
  j.set("neg_text", Json::string(r.neg_text));
  j.set("pos_token", Json::number(r.pos_token));
  j.set("neg_token", Json::number(r.neg_token));
  j.set("a", Json::number(r.calibration.a));
  j.set("b", Json::number(r.calibration.b));
  j.set("n_train_steps", Json::number(double(r.n_train_steps)));
  j.set("n_train_positive", Json::number(double(r.n_train_positive)));
  j.set("train_auroc", Json::number(r.train_auroc));
  j.set("train_log_loss", Json::number(r.train_log_loss));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return make_error("cannot write '" + path + "'");
  f << j.dump() << "\n";
  if (!f) return make_error("error writing '" + path + "'");
  return {};
}

Result<CalibrationRecord> read_calibration(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = Json::parse(ss.str());
  if (!j.ok()) return make_error(path + ": " + j.error());
  auto format = member(*j, "format", Json::Type::kString);
  if (!format.ok() || (*format)->as_string() != kFormat) return make_error(path + ": not an agentkv PRM calibration");
  auto version = member(*j, "version", Json::Type::kNumber);
  if (!version.ok() || (*version)->as_number() != kVersion) return make_error(path + ": unsupported version");
  CalibrationRecord r;
  const struct {
    const char* key;
    std::string* dst;
  } strings[] = {{"model_name", &r.model_name}, {"question", &r.question}, {"pos_text", &r.pos_text},
                 {"neg_text", &r.neg_text}};
  for (const auto& s : strings) {
    auto m = member(*j, s.key, Json::Type::kString);
    if (!m.ok()) return make_error(path + ": " + m.error());
    *s.dst = (*m)->as_string();
  }
  auto fp = member(*j, "model_fingerprint", Json::Type::kString);
  if (!fp.ok()) return make_error(path + ": " + fp.error());
  char* end = nullptr;
  const std::string& fps = (*fp)->as_string();
  r.model_fingerprint = std::strtoull(fps.c_str(), &end, 16);
  if (fps.size() != 16 || end != fps.c_str() + fps.size()) return make_error(path + ": model_fingerprint is not 16 hex digits");
  const struct {
    const char* key;
    double* dst;
  } numbers[] = {{"a", &r.calibration.a}, {"b", &r.calibration.b}, {"train_auroc", &r.train_auroc},
                 {"train_log_loss", &r.train_log_loss}};
  for (const auto& n : numbers) {
    auto m = member(*j, n.key, Json::Type::kNumber);
    if (!m.ok()) return make_error(path + ": " + m.error());
    *n.dst = (*m)->as_number();
  }
  const struct {
    const char* key;
    int64_t* dst;
  } counts[] = {{"n_train_steps", &r.n_train_steps}, {"n_train_positive", &r.n_train_positive}};
  for (const auto& c : counts) {
    auto m = member(*j, c.key, Json::Type::kNumber);
    if (!m.ok()) return make_error(path + ": " + m.error());
    *c.dst = int64_t((*m)->as_number());
  }
  for (auto [key, dst] : {std::pair{"pos_token", &r.pos_token}, std::pair{"neg_token", &r.neg_token}}) {
    auto m = member(*j, key, Json::Type::kNumber);
    if (!m.ok()) return make_error(path + ": " + m.error());
    *dst = int32_t((*m)->as_number());
  }
  return r;
}

Result<VerifyHead> head_from_record(const CalibrationRecord& r, const Tokenizer& tok, uint64_t model_fingerprint) {
  if (r.model_fingerprint != model_fingerprint)
    return make_error("calibration was fitted on model " + hex64(r.model_fingerprint) + " (" + r.model_name +
                      "), not on this model (" + hex64(model_fingerprint) + ")");
  auto head = make_verify_head(tok, r.question, r.pos_text, r.neg_text);
  if (!head.ok()) return make_error(head.error());
  if (head->pos_token != r.pos_token || head->neg_token != r.neg_token)
    return make_error("calibration's answer tokens differ from this tokenizer's");
  head->calibration = r.calibration;
  return head;
}

}  // namespace agentkv::prm
