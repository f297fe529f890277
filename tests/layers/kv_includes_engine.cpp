// Deliberately against the layer order: kv/ sits below engine/ (../shared/DESIGN.md), so this file,
// built with the kv layer's include path only, must fail to compile (tests/layers.cmake).
#include "engine/engine.h"
