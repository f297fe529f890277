#!/usr/bin/env bash
# agentkv bench against llama.cpp's llama-bench on the same GGUF, threads and machine, interleaved so
# both see the same machine state. Needs the reference build (scripts/build_llamacpp_reference.sh):
#   LLAMACPP_BIN=/path/to/llama.cpp/build/bin scripts/bench_vs_llamacpp.sh [threads] [reps]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LLAMACPP_BIN:?set LLAMACPP_BIN to the reference build/bin}
T=${1:-2}
R=${2:-3}
MODELS=${AGENTKV_MODELS:-$HOME/.cache/agentkv/models}
printf "%-8s %-8s %12s %12s %8s\n" model test agentkv llama.cpp ratio
for pair in smollm2:SmolLM2-135M-Instruct.Q4_1.gguf gemma3:gemma-3-270m-q4_k_m.gguf; do
  alias=${pair%%:*}; file=${pair#*:}
  ours=$(./build/agentkv bench -m "$alias" -p 512 -n 128 -t "$T" -r "$R")
  ref=$(LD_LIBRARY_PATH=$BIN "$BIN/llama-bench" -m "$MODELS/$file" -p 512 -n 128 -t "$T" -r "$R" -o json)
  python3 - "$alias" "$ours" "$ref" <<'PY'
import json, sys
alias, ours, ref = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
lc = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in ref}
for key, name in (("prefill_tok_s", "pp"), ("decode_tok_s", "tg")):
    print(f"{alias:8s} {name + ('512' if name == 'pp' else '128'):8s} {ours[key]:12.1f} {lc[name]:12.1f} {ours[key] / lc[name]:8.2f}")
PY
done
