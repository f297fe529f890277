// The control for kv_includes_engine.cpp: kv/ may include model/, a layer below it, so this
// compiles with the same machinery (tests/layers.cmake).
#include "kv/kv_manager.h"
#include "model/model.h"
