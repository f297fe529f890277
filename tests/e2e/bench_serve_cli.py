"""Smoke test of `agentkv bench-serve`: a tiny run in process and one against a running server (--url,
--api-key). The JSON report must be consistent: every level ran its requests without errors, counted
output tokens, and TTFT <= end-to-end latency. Nothing here is a speed check. Run under pytest (conftest.py).
"""
import json
import subprocess

COMMON = ["--clients", "1,3", "--requests", "6", "--max-tokens", "4", "--json"]


def check_report(out, levels):
    rep = json.loads(out)
    assert rep["model"] == "smollm2" and rep["max_tokens"] == 4, rep
    assert [l["clients"] for l in rep["levels"]] == levels, rep
    for l in rep["levels"]:
        assert l["requests"] == 6 and l["errors"] == 0, l
        assert 0 < l["output_tokens"] <= 6 * 4 and l["prompt_tokens"] > 0, l
        assert l["requests_per_second"] > 0 and l["output_tokens_per_second"] > 0, l
        assert 0 < l["ttft_p50_seconds"] <= l["ttft_p99_seconds"] <= l["e2e_p99_seconds"], l
        assert l["ttft_p50_seconds"] <= l["e2e_p50_seconds"] <= l["e2e_p99_seconds"] <= l["wall_seconds"], l
        # 4 tokens per stream: 3 gaps each, none longer than the stream
        assert 0 < l["itl_p50_seconds"] <= l["itl_p99_seconds"] <= l["itl_max_seconds"] <= l["e2e_p99_seconds"], l


def test_in_process(agentkv):
    run = subprocess.run([agentkv, "bench-serve", "-m", "smollm2", "--kv-mem", "128M", "-t", "2", *COMMON],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    check_report(run.stdout, [1, 3])


def test_mixed_load_with_long_documents(agentkv):
    """Every 3rd request carries a ~600-token document, prefilled in 64-token chunks beside the others."""
    run = subprocess.run([agentkv, "bench-serve", "-m", "smollm2", "--kv-mem", "128M", "-t", "2", "--clients", "3",
                          "--requests", "6", "--max-tokens", "4", "--json", "--long-every", "3",
                          "--long-prompt-tokens", "600", "--max-batch-tokens", "64"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rep = json.loads(run.stdout)
    assert rep["long_every"] == 3 and rep["long_prompt_tokens"] == 600, rep
    (l,) = rep["levels"]
    assert l["requests"] == 6 and l["errors"] == 0 and l["long_requests"] == 2, l
    # two documents of ~600 tokens beside four short prompts (each under 100 tokens with the template)
    assert l["prompt_tokens"] > 2 * 500, l


def test_against_a_running_server(agentkv, servers):
    _, port = servers.start(["--api-key", "k3y"], kv_mem="128M")
    run = subprocess.run([agentkv, "bench-serve", "--url", f"http://127.0.0.1:{port}", "--api-key", "k3y", *COMMON],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    check_report(run.stdout, [1, 3])
    # A wrong key: every request fails, and the command says so.
    bad = subprocess.run([agentkv, "bench-serve", "--url", f"http://127.0.0.1:{port}", "--api-key", "nope",
                          "--clients", "1", "--requests", "2", "--max-tokens", "2"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and "401" in bad.stderr and "2 requests failed" in bad.stderr, bad.stderr
