#include <cstdio>

int main(int argc, char** argv) {
  std::fprintf(stderr, "agentkv: no subcommand given\n");
  return 1;
}
