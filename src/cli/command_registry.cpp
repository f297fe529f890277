#include "cli/command_registry.h"

#include <vector>

namespace agentkv {

namespace {
// A function-local static, so registrars in other translation units may run in any order.
std::vector<CliCommand>& table() {
  static std::vector<CliCommand> t;
  return t;
}
}  // namespace

CliCommandRegistrar::CliCommandRegistrar(std::initializer_list<CliCommand> commands) {
  table().insert(table().end(), commands.begin(), commands.end());
}

std::span<const CliCommand> registered_commands() { return table(); }

}  // namespace agentkv
