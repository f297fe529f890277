"""End to end: schemathesis (pinned in requirements.txt) fuzzes a real `agentkv serve` (smollm2) from the OpenAPI
document (docs/openapi.json) for a bounded time, valid and invalid requests to every operation.

Checks: no 5xx but the documented 503 and 507 (not_a_server_error), every status and content type documented
for its operation, every JSON reply valid against its schema, every request the document calls invalid
refused with a 4xx (negative_data_rejection: the server accepts nothing the document forbids), and the
server alive and answering afterwards. Valid bodies name the served model and ask for at most 8 tokens
(fuzz_hooks.py), so they reach the routes' real work.

The server runs with --max-tokens 8, so that a generated request cannot ask for minutes of decoding on two
cores (a larger max_tokens is a documented 400); the seed is fixed so a run can be repeated. The phases:
the document's examples, schemathesis's coverage cases, random fuzzing, and stateful sequences that follow
the document's links (a created agent's id into its operations).
"""
import os
import subprocess
import sys

import http_raw
from conftest import SRC

KEY = "fuzz-e2e-key"
FUZZ_S = 75  # schemathesis's own budget (the case running at the deadline finishes; one case is at most 30 s)
HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_hooks.py")
CONFIG = f"""
hooks = "{HOOKS}"

[checks.not_a_server_error]
expected-statuses = ["2xx", "3xx", "4xx", "503", "507"]
"""


def test_schemathesis_finds_nothing(servers, tmp_path):
    proc, port = servers.start(extra_args=["--api-key", KEY, "--chat-sharing", "off", "--max-tokens", "8"],
                               kv_mem="128M")
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    cli = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    run = subprocess.run(
        [cli, "--config-file", str(config), "run", os.path.join(SRC, "docs", "openapi.json"),
         "--url", f"http://127.0.0.1:{port}", "-H", f"Authorization: Bearer {KEY}",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                     "response_schema_conformance,negative_data_rejection",
         "--max-time", str(FUZZ_S), "--request-timeout", "30", "--workers", "1", "--seed", "21",
         "--phases", "examples,coverage,fuzzing,stateful", "--max-examples", "40",
         "--suppress-health-check", "all", "--no-color"],
        capture_output=True, text=True, timeout=FUZZ_S + 150, cwd=tmp_path)  # --max-time lets the running case finish
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
    # Still serving, and still generating.
    assert proc.poll() is None, "the server exited during the fuzzing"
    assert http_raw.request(port, "GET", "/health").status == 200
    r = http_raw.request(port, "POST", "/v1/completions", {"model": "smollm2", "prompt": "One, two,", "max_tokens": 2},
                         headers={"Authorization": f"Bearer {KEY}"})
    assert r.status == 200 and r.json()["usage"]["completion_tokens"] > 0, r.body[:300]
