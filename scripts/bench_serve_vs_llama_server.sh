#!/usr/bin/env bash
# `agentkv bench-serve` (closed-loop streamed chat clients) against `agentkv serve` and against llama.cpp's
# `llama-server` on the same GGUF, the same threads and the same machine, one server at a time, each
# level of clients run against both before the next model. The load generator can be pinned to other
# cores than the server (SERVER_CPUS / CLIENT_CPUS, taskset lists), as BENCHMARKS.md reports it.
# Needs the reference build (scripts/build_llamacpp_reference.sh):
#   LLAMACPP_BIN=/path/to/llama.cpp/build/bin scripts/bench_serve_vs_llama_server.sh [threads] [clients] [seconds]
# e.g. SERVER_CPUS=0 CLIENT_CPUS=1 scripts/bench_serve_vs_llama_server.sh 1 1,8,32,64 15
# JSON reports land in $OUT (default /tmp/bench-serve-vs); a table is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LLAMACPP_BIN:?set LLAMACPP_BIN to the reference build/bin}
T=${1:-2}
CLIENTS=${2:-1,8,32,64}
SECONDS_PER_LEVEL=${3:-15}
MODELS=${AGENTKV_MODELS:-$HOME/.cache/agentkv/models}
OUT=${OUT:-/tmp/bench-serve-vs}
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
MAX_CLIENTS=$(tr ',' '\n' <<<"$CLIENTS" | sort -n | tail -1)
mkdir -p "$OUT"

# taskset prefixes (empty: anywhere); as a command's prefix they keep $! the server's own pid.
PIN_SERVER=(); PIN_CLIENT=()
[[ -n $SERVER_CPUS ]] && PIN_SERVER=(taskset -c "$SERVER_CPUS")
[[ -n $CLIENT_CPUS ]] && PIN_CLIENT=(taskset -c "$CLIENT_CPUS")

wait_ready() {  # wait_ready PORT PID
  for _ in $(seq 1 600); do
    if ! kill -0 "$2" 2>/dev/null; then echo "server on port $1 exited" >&2; return 1; fi
    if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "server on port $1 not ready" >&2
  return 1
}

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

run_server() {  # run_server NAME ALIAS FILE PORT
  local name=$1 alias=$2 file=$3 port=$4 pid
  if [[ $name == agentkv ]]; then
    "${PIN_SERVER[@]}" ./build/agentkv serve -m "$alias" --port "$port" -t "$T" --kv-mem 1G \
      --chat-sharing off --round-sharing off >"$OUT/$name-$alias.log" 2>&1 &
  else
    # One slot per client, each with room for a prompt and its answer; llama-server's own defaults
    # otherwise (continuous batching, flash attention auto).
    LD_LIBRARY_PATH=$BIN "${PIN_SERVER[@]}" "$BIN/llama-server" -m "$MODELS/$file" --port "$port" -t "$T" -tb "$T" \
      -np "$MAX_CLIENTS" -c $((MAX_CLIENTS * 512)) --no-webui >"$OUT/$name-$alias.log" 2>&1 &
  fi
  pid=$!
  PIDS+=("$pid")
  wait_ready "$port" "$pid"
  "${PIN_CLIENT[@]}" ./build/agentkv bench-serve --url "http://127.0.0.1:$port" -m "$alias" --clients "$CLIENTS" \
    --duration "$SECONDS_PER_LEVEL" --json >"$OUT/$name-$alias.json"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

for pair in smollm2:SmolLM2-135M-Instruct.Q4_1.gguf gemma3:gemma-3-270m-q4_k_m.gguf; do
  alias=${pair%%:*}; file=${pair#*:}
  run_server agentkv "$alias" "$file" 18181
  run_server llama-server "$alias" "$file" 18182
done

python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"{'model':8s} {'clients':>7s} {'agentkv tok/s':>14s} {'llama-server':>13s} {'ratio':>6s} "
      f"{'TTFT p99 ours':>14s} {'TTFT p99 theirs':>16s} {'ITL p99 ours':>13s} {'ITL p99 theirs':>15s}")
for alias in ("smollm2", "gemma3"):
    a = json.loads((out / f"agentkv-{alias}.json").read_text())["levels"]
    l = json.loads((out / f"llama-server-{alias}.json").read_text())["levels"]
    for x, y in zip(a, l):
        r = x["output_tokens_per_second"] / y["output_tokens_per_second"] if y["output_tokens_per_second"] else 0
        print(f"{alias:8s} {x['clients']:7d} {x['output_tokens_per_second']:14.1f} {y['output_tokens_per_second']:13.1f} "
              f"{r:6.2f} {x['ttft_p99_seconds'] * 1e3:12.0f}ms {y['ttft_p99_seconds'] * 1e3:14.0f}ms "
              f"{x['itl_p99_seconds'] * 1e3:11.1f}ms {y['itl_p99_seconds'] * 1e3:13.1f}ms")
PY
