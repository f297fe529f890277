// Declarative command-line options: each option is declared once with its names, default and help,
// so parsing, validation errors and --help text come from one place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace agentkv {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  void add_string(const std::string& names, std::string* dst, const std::string& help, bool required = false);
  void add_int(const std::string& names, int64_t* dst, const std::string& help, int64_t lo, int64_t hi);
  void add_float(const std::string& names, double* dst, const std::string& help, double lo, double hi);
  void add_flag(const std::string& names, bool* dst, const std::string& help);
  // The budget options every command shares, declared here once so each is checked against the
  // machine the same way: -t,--threads (0 = all cores; more than the hardware threads this process
  // may use is refused) and --kv-mem (a byte size such as 2G, 0 when not given; more than RAM or the
  // cgroup limit is refused, naming both sizes).
  void add_threads(int64_t* dst, const std::string& help = "threads (0 = all cores)");
  void add_kv_mem(int64_t* dst, const std::string& help);
  // A byte size such as 512M or 4G (kv/kv_manager.h's parse_byte_size); 0 when not given.
  void add_byte_size(const std::string& names, int64_t* dst, const std::string& help);
  // A list option: may be repeated (-m A -m B) and each value may be a comma list (-m A,B); the
  // first occurrence replaces the default, later ones append.
  void add_list(const std::string& names, std::vector<std::string>* dst, const std::string& help);

  // Parses argv[first..argc). Returns an error naming the offending option; `help_requested`
  // is set for -h/--help (the caller prints usage() and exits 0).
  Status parse(int argc, char** argv, int first, bool* help_requested);
  std::string usage() const;

  // parse() for a subcommand: on --help prints usage() and yields 0, on an error prints the one-line
  // error and yields 1; yields nothing when the command should run.
  std::optional<int> parse_command(int argc, char** argv);

 private:
  struct Option {
    std::vector<std::string> names;  // e.g. {"-m", "--model"}
    std::string help;
    bool takes_value;
    bool required;
    bool seen = false;
    std::string default_text;
    std::function<Status(const std::string&)> set;
  };
  Option* find(const std::string& name);
  void add(const std::string& names, const std::string& help, bool takes_value, bool required,
           std::string default_text, std::function<Status(const std::string&)> set);

  std::string command_;
  std::string summary_;
  std::vector<Option> options_;
};

}  // namespace agentkv
