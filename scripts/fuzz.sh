#!/usr/bin/env bash
# Builds the libFuzzer targets (GGUF reader, tokenizer input, JSON bodies, byte sizes, HTTP requests,
# JSON Schemas, KV tier records, segment index records)
# with clang + ASan/UBSan and runs each for $FUZZ_SECONDS (default 60), as many at once as there are cores,
# seeded from the committed test data;
# a crash fails the script and leaves its input in <tree>/<target>-crash-* (build-fuzz, or $FUZZ_BUILD).
# scripts/test.sh runs all of them with FUZZ_SECONDS=20.
#   scripts/fuzz.sh [target ...]      targets: gguf_fuzz tokenizer_fuzz json_fuzz byte_size_fuzz http_request_fuzz openai_request_fuzz agents_request_fuzz json_schema_fuzz tier_record_fuzz segment_index_record_fuzz
#   FUZZ_SECONDS=20 scripts/fuzz.sh   each target for 20 s
#   FUZZ_BUILD=build-asan scripts/fuzz.sh   use a tree already configured with AGENTKV_FUZZ=ON (scripts/test.sh's
#                                           ASan + UBSan tree, which builds the unit tests and the fuzzers at once)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/apt_install.sh clang libclang-rt-14-dev
targets=("$@")
((${#targets[@]})) || targets=(gguf_fuzz tokenizer_fuzz json_fuzz byte_size_fuzz http_request_fuzz openai_request_fuzz agents_request_fuzz json_schema_fuzz tier_record_fuzz segment_index_record_fuzz)
tree=${FUZZ_BUILD:-build-fuzz}
if [[ -z ${FUZZ_BUILD:-} ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$tree" -DAGENTKV_FUZZ=ON -DAGENTKV_TESTS=OFF -DAGENTKV_SANITIZE=ON >/dev/null
elif ! grep -q '^AGENTKV_FUZZ:BOOL=ON' "$tree/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: FUZZ_BUILD=$tree is not a tree configured with -DAGENTKV_FUZZ=ON" >&2
  exit 2
fi
cmake --build "$tree" -j"$(nproc)" --target "${targets[@]}"
# The corpus of target $1, seeded from the committed test data.
seed_corpus() {
  local t=$1 corpus=$tree/corpus-$1
  mkdir -p "$corpus"
  case $t in
    gguf_fuzz) cp -n tests/data/valid_small.gguf tests/data/malformed/*.gguf "$corpus"/ ;;
    json_fuzz) cp -n tests/data/logits/*.json tests/data/perplexity/goldens.json "$corpus"/ ;;
    tokenizer_fuzz) head -c 4096 tests/data/tokenizer/corpus.jsonl > "$corpus/seed" ;;
    byte_size_fuzz) printf 1.5GiB > "$corpus/seed" ;;
    tier_record_fuzz) cp -n tests/data/tier/*.kvblock "$corpus"/ ;;
    segment_index_record_fuzz) cp -n tests/data/tier/*.kvseg "$corpus"/ ;;
    openai_request_fuzz)
      printf '{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"logprobs":true,"top_logprobs":3,"stop":["x"]}' > "$corpus/seed-chat"
      printf '{"model":"m","prompt":[1,2,3],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}' > "$corpus/seed-completion"
      printf '%s' '{"model":"m","messages":[{"role":"developer","content":"Use tools."},{"role":"user","name":"ann","content":[{"type":"text","text":"Weather?"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"-3C"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,"presence_penalty":0.5,"frequency_penalty":-1,"logit_bias":{"7":-100},"metadata":{"k":"v"},"x_unknown":1}' > "$corpus/seed-tools"
      printf '%s' '{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"Person","strict":true,"schema":{"type":"object","properties":{"age":{"type":"integer"}},"required":["age"],"additionalProperties":false}}}}' > "$corpus/seed-response-format" ;;
    agents_request_fuzz)
      printf '{"agents":["a","b"],"shared":"news","kv_sharing":true,"recompute":0.2,"max_tokens":4}' > "$corpus/seed-round"
      printf '{"steps":["Step 1: 2 + 2 = 4"],"prefix":"x"}' > "$corpus/seed-score"
      printf '{"model":"m","system":"s","messages":[{"role":"user","content":"hi"}],"ttl_seconds":5}' > "$corpus/seed-create"
      printf '%s' '{"object":"agent.export","format":1,"id":"agent-1","name":"Ada","model":"m","ttl_seconds":60,"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}],"segments":["Bram: hi"],"last_answer":"ok","resident_tokens":40,"kv":{"published_blocks":2,"published":true}}' > "$corpus/seed-import" ;;
    json_schema_fuzz)
      printf '%s' '{"$defs":{"Pet":{"properties":{"name":{"type":"string","maxLength":8},"age":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["name","age"],"type":"object","additionalProperties":false},"Kind":{"enum":["a","b"],"type":"string"}},"properties":{"kind":{"$ref":"#/$defs/Kind"},"pets":{"items":{"$ref":"#/$defs/Pet"},"type":"array","maxItems":3},"zip":{"type":"string","pattern":"^[0-9]{5}(-[0-9]{4})?$"},"born":{"type":"string","format":"date"},"score":{"type":"number"},"tree":{"items":{"$ref":"#"},"type":"array"}},"required":["kind","pets"],"title":"Person","type":"object","additionalProperties":false}' > "$corpus/seed-pydantic" ;;
    http_request_fuzz)
      printf '\x01\x02POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}' > "$corpus/seed-post"
      printf '\x07\x00GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n' > "$corpus/seed-pipelined" ;;
  esac
}

# Each target runs on its own core (libFuzzer is single-threaded), $(nproc) at a time; its output goes to
# <tree>/<target>.log and its exit status to <tree>/<target>.rc, printed in order once all are done.
run_one() {
  local t=$1
  seed_corpus "$t"
  local rc=0
  "$tree/$t" -max_total_time="${FUZZ_SECONDS:-60}" -print_final_stats=1 -artifact_prefix="$tree/$t-" \
    "$tree/corpus-$t" > "$tree/$t.log" 2>&1 || rc=$?
  echo "$rc" > "$tree/$t.rc"
}
for t in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= $(nproc) )); do wait -n || true; done
  rm -f "$tree/$t.rc"
  run_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  echo "== $t"
  rc=$(cat "$tree/$t.rc" 2>/dev/null || echo missing)
  if [[ $rc == 0 ]]; then
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$tree/$t.log" || tail -n 3 "$tree/$t.log"
  else
    tail -n 60 "$tree/$t.log"
    echo "fuzz.sh: $t failed (exit $rc); its log is $tree/$t.log, a crashing input $tree/$t-crash-*" >&2
    failed+=("$t")
  fi
done
((${#failed[@]} == 0)) || { echo "fuzz.sh: failed: ${failed[*]}" >&2; exit 1; }
