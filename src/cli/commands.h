// Subcommands of the agentkv binary. Each takes argv starting at the subcommand name and returns
// the process exit status.
#pragma once

// `agentkv inspect FILE`: dumps GGUF metadata (arrays truncated) and the tensor table.
int cmd_inspect(int argc, char** argv);
