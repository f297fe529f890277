#!/usr/bin/env python3
"""`agentkv tokenize` end to end: every valid-UTF-8 string of the tokenizer corpus goes through the CLI as
JSONL; the printed id arrays must equal llama.cpp's (tests/data/tokenizer/<model>.golden.jsonl, the
"plain" ids: no BOS, special-token text not parsed). usage: cli_tokenize_check.py AGENTKV MODEL"""
import json
import os
import subprocess
import sys
import tempfile

agentkv, model = sys.argv[1], sys.argv[2]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
rows = [json.loads(l) for l in open(os.path.join(root, f"tests/data/tokenizer/{model}.golden.jsonl"))][1:]
texts, want = [], []
for r in rows:
    try:
        texts.append(bytes.fromhex(r["hex"]).decode("utf-8"))
    except UnicodeDecodeError:
        continue  # JSON strings cannot carry invalid UTF-8; the library test covers those
    want.append(r["plain"])
with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps(t) + "\n")
out = subprocess.run([agentkv, "tokenize", "-m", model, "--jsonl", f.name], capture_output=True, text=True)
os.unlink(f.name)
if out.returncode != 0:
    sys.exit(f"agentkv tokenize failed: {out.stderr.strip()}")
got = [json.loads(l) for l in out.stdout.splitlines()]
bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
if len(got) != len(want) or bad:
    sys.exit(f"{len(got)} lines for {len(want)} strings; mismatches at {bad[:10]}")
print(f"{model}: {len(want)} strings tokenized identically to llama.cpp")
