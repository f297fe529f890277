#!/usr/bin/env bash
# Runs the whole test suite (what CI runs, .ci/run): set-up without the main job (idempotent), then
#   1. Release: unit, model and end-to-end (pytest, label e2e) tests;
#   2. ASan + UBSan: the unit tests and the malformed-GGUF set;
#   3. ThreadSanitizer: the threaded tests (HTTP transport, protocols, thread pool, engine loop; label tsan);
#   4. every libFuzzer target for $FUZZ_SECONDS (default 20) each, seeded from the committed data.
# Each tree is built right before its tests run. Budget: under 60 minutes on a 2-core CI machine.
# History: the CI run of 2026-12-02 took 3700 s before the TSan stage; the two longest e2e tests now start
# first (COST), send their independent requests concurrently, and the ASan and fuzz stages share one clang
# tree; every tree is a unity build (AGENTKV_UNITY_BUILD in CMakeLists.txt). Stop 32's CI took 4257 s:
# Make built one library at a time (one core idle on every single-batch library) and attention was a
# third of the model tests' time. Since then trees are built with Ninja (CMAKE_GENERATOR below) and
# attend_spans is register-blocked; clean clone 2026-12-03 18:16 (with other work on the machine): Release
# set-up and build 232 s (was 572), tests built at 421 s (was 945), Release tests 1892 s (was 2459).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-run
JOBS=$(nproc)
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}  # new trees only (scripts/setup.sh says why)

echo "== Release: unit, model and e2e tests"
cmake --build build -j"$JOBS"
(cd build && ctest --output-on-failure -j"$JOBS")

echo "== ASan + UBSan: unit tests and malformed GGUF files"
# One clang tree for this stage and the fuzz stage: the fuzz targets need clang's libFuzzer, and building
# the sanitized libraries once instead of twice saves minutes on two cores. The coverage instrumentation
# the fuzzers need (-fsanitize=fuzzer-no-link) comes along in the unit tests; it only counts edges.
scripts/apt_install.sh clang libclang-rt-14-dev
# -O1 (what the ASan documentation recommends) and line tables only (file:line in every report) instead of
# -O2 -g: a faster build of the largest tree; the unit tests take about a minute either way.
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTKV_SANITIZE=ON \
  -DAGENTKV_FUZZ=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" >/dev/null
cmake --build build-asan -j"$JOBS" --target agentkv agentkv_unit_tests
(cd build-asan && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
   ctest --output-on-failure -j"$JOBS" -L unit)

echo "== ThreadSanitizer: HTTP server, protocol, thread-pool and engine-loop tests"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTKV_TSAN=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build-tsan -j"$JOBS" --target agentkv_tsan_tests
# halt_on_error: the first race fails its test, not just a warning in the log.
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -j"$JOBS" -L tsan)

echo "== Fuzz: each target for ${FUZZ_SECONDS:-20} s (in the ASan + UBSan tree)"
FUZZ_BUILD=build-asan FUZZ_SECONDS=${FUZZ_SECONDS:-20} scripts/fuzz.sh
