#include <cstdio>
#include <cstring>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // Minimal dispatch until the full CLI lands.
  if (argc >= 2 && std::strcmp(argv[1], "inspect") == 0) return cmd_inspect(argc - 1, argv + 1);
  std::fprintf(stderr, "agentkv: no subcommand given\n");
  return 1;
}
