#!/usr/bin/env python3
"""`agentkv serve` takes several models as repeated -m options, as a comma list, or both mixed; the
request's "model" picks one. A model named twice is a one-line error.

Usage: serve_models_cli.py AGENTKV_BINARY
"""
import subprocess
import sys

from http_raw import request, start_server

BIN = sys.argv[1]


def served_ids(models):
    proc, port = start_server(BIN, models=models, kv_mem="64M")
    try:
        ids = [m["id"] for m in request(port, "GET", "/v1/models").json()["data"]]
        # Each model answers requests that name it.
        for model in ids:
            r = request(port, "POST", "/v1/completions", {"model": model, "prompt": "Hi", "max_tokens": 1})
            assert r.status == 200 and r.json()["model"] == model, (model, r.status, r.body[:200])
        return ids
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def main():
    assert served_ids(["smollm2", "gemma3"]) == ["smollm2", "gemma3"]
    assert served_ids(["smollm2,gemma3"]) == ["smollm2", "gemma3"]
    assert served_ids(["gemma3"]) == ["gemma3"]  # -m replaces the default model
    twice = subprocess.run([BIN, "serve", "-m", "smollm2", "-m", "gemma3,smollm2", "--port", "0"],
                           capture_output=True, text=True, timeout=120)
    assert twice.returncode == 1 and "given twice" in twice.stderr, (twice.returncode, twice.stderr)
    assert len(twice.stderr.strip().splitlines()) == 1, twice.stderr
    empty = subprocess.run([BIN, "serve", "-m", ",", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert empty.returncode == 1 and "--model" in empty.stderr, empty.stderr
    print("serve models cli: ok")


if __name__ == "__main__":
    main()
