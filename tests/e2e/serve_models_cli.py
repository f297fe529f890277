"""`agentkv serve` takes several models as repeated -m options, as a comma list, or both mixed; the
request's "model" picks one. A model named twice is a one-line error. Run under pytest (conftest.py).
"""
import subprocess

import pytest

from http_raw import request


@pytest.mark.parametrize("models, expected", [
    (["smollm2", "gemma3"], ["smollm2", "gemma3"]),
    (["smollm2,gemma3"], ["smollm2", "gemma3"]),
    (["gemma3"], ["gemma3"]),  # -m replaces the default model
], ids=["repeated", "comma_list", "replaces_default"])
def test_served_models(servers, models, expected):
    proc, port = servers.start(models=models, kv_mem="64M")
    ids = [m["id"] for m in request(port, "GET", "/v1/models").json()["data"]]
    # Each model answers requests that name it.
    for model in ids:
        r = request(port, "POST", "/v1/completions", {"model": model, "prompt": "Hi", "max_tokens": 1})
        assert r.status == 200 and r.json()["model"] == model, (model, r.status, r.body[:200])
    proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert ids == expected


def test_model_given_twice_is_a_one_line_error(agentkv):
    twice = subprocess.run([agentkv, "serve", "-m", "smollm2", "-m", "gemma3,smollm2", "--port", "0"],
                           capture_output=True, text=True, timeout=120)
    assert twice.returncode == 1 and "given twice" in twice.stderr, (twice.returncode, twice.stderr)
    assert len(twice.stderr.strip().splitlines()) == 1, twice.stderr


def test_empty_model_list_is_an_error(agentkv):
    empty = subprocess.run([agentkv, "serve", "-m", ",", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert empty.returncode == 1 and "--model" in empty.stderr, empty.stderr
