"""Starts `agentkv serve` on a free loopback port for an end-to-end test and returns (process, port)."""
import re
import subprocess
import time


def start_server(binary, args, timeout_s=180):
    proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit(f"server exited early (rc={proc.poll()})")
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise SystemExit("server did not report its port")
