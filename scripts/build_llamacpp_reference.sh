#!/usr/bin/env bash
# Builds the correctness/speed reference: llama.cpp as vendored in the llama-cpp-python sdist from PyPI
# (compiled from source), plus its Python bindings pointed at that build. Used only to make goldens
# and benchmark ratios in a developer session; CI compares against the committed goldens.
# Output: $LLAMACPP_REF (default /tmp/llamacpp-ref) with build/bin/{libllama.so,llama-perplexity,llama-bench,
# llama-server,...} (llama-server: the peer `agentkv bench-serve --url` is measured against in BENCHMARKS.md).
set -euo pipefail
VERSION=0.3.36
REF=${LLAMACPP_REF:-/tmp/llamacpp-ref}
mkdir -p "$REF"
cd "$REF"
if [[ ! -d llama_cpp_python-$VERSION ]]; then
  pip download --no-deps --no-binary :all: -d . "llama-cpp-python==$VERSION"
  tar xzf "llama_cpp_python-$VERSION.tar.gz"
fi
SRC=$REF/llama_cpp_python-$VERSION/vendor/llama.cpp
cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
cmake --build "$SRC/build" -j"$(nproc)" --target llama llama-perplexity llama-bench llama-tokenize llama-server
pip install -q numpy typing-extensions diskcache jinja2
echo "export PYTHONPATH=$REF/llama_cpp_python-$VERSION LLAMA_CPP_LIB_PATH=$SRC/build/bin LLAMACPP_BIN=$SRC/build/bin"
