// The table of `agentkv` subcommands. The product's commands are listed in main.cpp; commands built
// outside the product (the lab's fitting, evaluation and benchmark harnesses, lab/cli/) add
// themselves to the same binary through a registrar, so the product never includes the lab and
// every subcommand keeps its name.
#pragma once

#include <initializer_list>
#include <span>

namespace agentkv {

struct CliCommand {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name; returns the exit code
  const char* summary;
};

// A static CliCommandRegistrar in a linked object file adds its commands, in order, before main.
class CliCommandRegistrar {
 public:
  CliCommandRegistrar(std::initializer_list<CliCommand> commands);
};

// Commands added by registrars, in registration order.
std::span<const CliCommand> registered_commands();

}  // namespace agentkv
