#!/usr/bin/env bash
# Runs an agentkv command that must be refused: a non-zero exit (not a timeout: a hang is a failure),
# and stderr matching the expected message. @FIFO@ and @DIR@ in the arguments become a FIFO with no
# writer and a directory made for the run. usage: cli_refuses.sh REGEX AGENTKV ARGS...
set -u
want=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/fifo"
mkdir "$tmp/dir"
args=()
for a in "$@"; do
  a=${a//@FIFO@/$tmp/fifo}
  args+=("${a//@DIR@/$tmp/dir}")
done
timeout 20 "${args[@]}" >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
cat "$tmp/err"
if [ "$rc" -eq 0 ]; then echo "FAIL: exit 0, expected a refusal"; exit 1; fi
if [ "$rc" -eq 124 ]; then echo "FAIL: timed out (a hang)"; exit 1; fi
if ! grep -Eq -e "$want" "$tmp/err"; then echo "FAIL: stderr does not match '$want'"; exit 1; fi
echo "refused as expected (exit $rc)"
