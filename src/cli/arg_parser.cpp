#include "cli/arg_parser.h"

#include "cli/commands.h"
#include "kv/kv_manager.h"
#include "util/machine.h"

#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

namespace agentkv {

namespace {

std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream ss(names);
  std::string n;
  while (std::getline(ss, n, ',')) out.push_back(n);
  return out;
}

std::string format_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void ArgParser::add(const std::string& names, const std::string& help, bool takes_value, bool required,
                    std::string default_text, std::function<Status(const std::string&)> set) {
  options_.push_back(Option{split_names(names), help, takes_value, required, false, std::move(default_text),
                            std::move(set)});
}

void ArgParser::add_string(const std::string& names, std::string* dst, const std::string& help, bool required) {
  add(names, help, true, required, *dst, [dst](const std::string& v) -> Status {
    *dst = v;
    return {};
  });
}

void ArgParser::add_int(const std::string& names, int64_t* dst, const std::string& help, int64_t lo, int64_t hi) {
  std::string first = split_names(names).back();
  add(names, help, true, false, std::to_string(*dst), [=](const std::string& v) -> Status {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE)
      return make_error("option " + first + " expects an integer, got '" + v + "'");
    if (x < lo || x > hi)
      return make_error("option " + first + " = " + v + " out of range [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
    *dst = x;
    return {};
  });
}

void ArgParser::add_float(const std::string& names, double* dst, const std::string& help, double lo, double hi) {
  std::string first = split_names(names).back();
  add(names, help, true, false, format_double(*dst), [=](const std::string& v) -> Status {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x))
      return make_error("option " + first + " expects a number, got '" + v + "'");
    if (x < lo || x > hi)
      return make_error("option " + first + " = " + v + " out of range [" + format_double(lo) + ", " +
                        format_double(hi) + "]");
    *dst = x;
    return {};
  });
}

void ArgParser::add_threads(int64_t* dst, const std::string& help) {
  add_int("-t,--threads", dst, help, 0, 1 << 20);
  std::function<Status(const std::string&)> parse_int = std::move(options_.back().set);
  options_.back().set = [dst, parse_int](const std::string& v) -> Status {
    AGENTKV_TRY(parse_int(v));
    return check_thread_count("-t", *dst);
  };
}

void ArgParser::add_byte_size(const std::string& names, int64_t* dst, const std::string& help) {
  const std::string first = split_names(names).back();
  add(names, help, true, false, *dst > 0 ? format_bytes(*dst) : "", [dst, first](const std::string& v) -> Status {
    auto b = parse_byte_size(v);
    if (!b.ok()) return make_error(first + ": " + b.error());
    *dst = *b;
    return {};
  });
}

void ArgParser::add_kv_mem(int64_t* dst, const std::string& help) {
  add_byte_size("--kv-mem", dst, help);
  std::function<Status(const std::string&)> parse_size = std::move(options_.back().set);
  options_.back().set = [dst, parse_size](const std::string& v) -> Status {
    AGENTKV_TRY(parse_size(v));
    return check_memory_budget("--kv-mem", *dst);
  };
}

void ArgParser::add_flag(const std::string& names, bool* dst, const std::string& help) {
  add(names, help, false, false, "", [dst](const std::string&) -> Status {
    *dst = true;
    return {};
  });
}

void ArgParser::add_list(const std::string& names, std::vector<std::string>* dst, const std::string& help) {
  std::string default_text;
  for (const std::string& v : *dst) default_text += (default_text.empty() ? "" : ",") + v;
  const std::string first = split_names(names).back();
  auto replaced_default = std::make_shared<bool>(false);
  add(names, help, true, false, default_text, [=](const std::string& v) -> Status {
    const std::vector<std::string> items = split_commas(v);
    if (items.empty()) return make_error("option " + first + " expects a value, got '" + v + "'");
    if (!*replaced_default) dst->clear();
    *replaced_default = true;
    dst->insert(dst->end(), items.begin(), items.end());
    return {};
  });
}

ArgParser::Option* ArgParser::find(const std::string& name) {
  for (auto& o : options_)
    for (auto& n : o.names)
      if (n == name) return &o;
  return nullptr;
}

Status ArgParser::parse(int argc, char** argv, int first, bool* help_requested) {
  *help_requested = false;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      *help_requested = true;
      return {};
    }
    std::string value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    Option* o = find(a);
    if (!o) return make_error("unknown option '" + a + "' for '" + command_ + "' (see agentkv " + command_ + " --help)");
    if (o->takes_value && !has_inline) {
      if (i + 1 >= argc) return make_error("option " + a + " needs a value");
      value = argv[++i];
    } else if (!o->takes_value && has_inline) {
      return make_error("option " + a + " takes no value");
    }
    Status st = o->set(value);
    if (!st.ok()) return st;
    o->seen = true;
  }
  for (auto& o : options_)
    if (o.required && !o.seen) return make_error("missing required option " + o.names.back());
  return {};
}

std::optional<int> ArgParser::parse_command(int argc, char** argv) {
  bool help = false;
  if (Status st = parse(argc, argv, 1, &help); !st.ok()) return cli_fail(st.error());
  if (help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

std::string ArgParser::usage() const {
  std::ostringstream os;
  os << "usage: agentkv " << command_ << " [options]\n" << summary_ << "\n\noptions:\n";
  for (auto& o : options_) {
    std::string n;
    for (size_t i = 0; i < o.names.size(); ++i) n += (i ? ", " : "") + o.names[i];
    if (o.takes_value) n += " VALUE";
    os << "  " << n;
    for (size_t pad = n.size(); pad < 28; ++pad) os << ' ';
    os << ' ' << o.help;
    if (o.required) os << " (required)";
    else if (!o.default_text.empty()) os << " (default: " << o.default_text << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace agentkv
