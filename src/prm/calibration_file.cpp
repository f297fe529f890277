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

template <class T>
Json number_array(const std::vector<T>& v) {
  Json a = Json::array();
  for (T x : v) a.push(Json::number(double(x)));
  return a;
}

Json probe_json(const StepProbe& p) {
  Json j = Json::object();
  j.set("layer", Json::number(p.layer));
  j.set("bias", Json::number(p.bias));
  j.set("l2", Json::number(p.l2));
  j.set("mean", number_array(p.mean));
  j.set("inv_std", number_array(p.inv_std));
  j.set("weight", number_array(p.weight));
  j.set("checksum", Json::string(probe_checksum(p)));
  return j;
}

template <class T>
Status read_array(const Json& j, const char* key, std::vector<T>& out) {
  const Json* a = j.get(key);
  if (!a || !a->is_array()) return make_error(std::string("probe field '") + key + "' missing or not an array");
  for (const Json& x : a->items()) {
    if (!x.is_number()) return make_error(std::string("probe field '") + key + "' holds a non-number");
    out.push_back(T(x.as_number()));
  }
  return {};
}

Result<StepProbe> probe_from_json(const Json& j) {
  StepProbe p;
  for (auto [key, dst] : {std::pair{"layer", (double*)nullptr}, std::pair{"bias", &p.bias}, std::pair{"l2", &p.l2}}) {
    const Json* m = j.get(key);
    if (!m || !m->is_number()) return make_error(std::string("probe field '") + key + "' missing or not a number");
    if (dst) *dst = m->as_number();
    else p.layer = int(m->as_number());
  }
  if (Status st = read_array(j, "mean", p.mean); !st.ok()) return st.status_error();
  if (Status st = read_array(j, "inv_std", p.inv_std); !st.ok()) return st.status_error();
  if (Status st = read_array(j, "weight", p.weight); !st.ok()) return st.status_error();
  if (p.weight.empty() || p.mean.size() != p.weight.size() || p.inv_std.size() != p.weight.size())
    return make_error("probe arrays 'mean', 'inv_std', 'weight' differ in length or are empty");
  const Json* sum = j.get("checksum");
  if (!sum || !sum->is_string() || sum->as_string() != probe_checksum(p))
    return make_error(ErrorCode::kDataLoss, "probe checksum mismatch (the file is corrupted or was edited)");
  return p;
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
  if (r.probe) {
    j.set("probe", probe_json(*r.probe));
    if (std::isfinite(r.heldout_auroc)) j.set("heldout_auroc", Json::number(r.heldout_auroc));
  }
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
  if (!j.ok()) return make_error(j.code(), path + ": " + j.error());
  auto format = member(*j, "format", Json::Type::kString);
  if (!format.ok() || (*format)->as_string() != kFormat) return make_error(path + ": not an agentkv PRM calibration");
  auto version = member(*j, "version", Json::Type::kNumber);
  if (!version.ok() || ((*version)->as_number() != kVersion && (*version)->as_number() != 1))
    return make_error(path + ": unsupported version");
  CalibrationRecord r;
  const struct {
    const char* key;
    std::string* dst;
  } strings[] = {{"model_name", &r.model_name}, {"question", &r.question}, {"pos_text", &r.pos_text},
                 {"neg_text", &r.neg_text}};
  for (const auto& s : strings) {
    auto m = member(*j, s.key, Json::Type::kString);
    if (!m.ok()) return make_error(m.code(), path + ": " + m.error());
    *s.dst = (*m)->as_string();
  }
  auto fp = member(*j, "model_fingerprint", Json::Type::kString);
  if (!fp.ok()) return make_error(fp.code(), path + ": " + fp.error());
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
    if (!m.ok()) return make_error(m.code(), path + ": " + m.error());
    *n.dst = (*m)->as_number();
  }
  const struct {
    const char* key;
    int64_t* dst;
  } counts[] = {{"n_train_steps", &r.n_train_steps}, {"n_train_positive", &r.n_train_positive}};
  for (const auto& c : counts) {
    auto m = member(*j, c.key, Json::Type::kNumber);
    if (!m.ok()) return make_error(m.code(), path + ": " + m.error());
    *c.dst = int64_t((*m)->as_number());
  }
  for (auto [key, dst] : {std::pair{"pos_token", &r.pos_token}, std::pair{"neg_token", &r.neg_token}}) {
    auto m = member(*j, key, Json::Type::kNumber);
    if (!m.ok()) return make_error(m.code(), path + ": " + m.error());
    *dst = int32_t((*m)->as_number());
  }
  if (const Json* pj = j->get("probe")) {
    auto probe = probe_from_json(*pj);
    if (!probe.ok()) return make_error(probe.code(), path + ": " + probe.error());
    r.probe = std::move(*probe);
    if (const Json* h = j->get("heldout_auroc"); h && h->is_number()) r.heldout_auroc = h->as_number();
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
