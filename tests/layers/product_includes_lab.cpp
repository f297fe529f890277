// Deliberately wrong: product code (here built as the top product layer, the server) including a
// lab header must fail to compile, since no product target sees the lab's root (tests/layers.cmake).
#include "lab/agents/workload.h"
