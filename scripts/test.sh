#!/usr/bin/env bash
# Runs the whole test suite: set-up (idempotent), then unit + model tests on the Release build, then
# the unit tests and the malformed-GGUF set under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-run
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1
echo "== Release: unit and model tests"
(cd build && ctest --output-on-failure -j"$(nproc)")
echo "== ASan + UBSan: unit tests and malformed GGUF files"
(cd build-asan && ctest --output-on-failure -j"$(nproc)" -L unit)
