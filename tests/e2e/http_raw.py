"""Raw HTTP/1.1 over a socket, for the server tests that must send what no well-behaved client sends
(bad framing, invalid UTF-8, huge bodies) and for starting `agentkv serve` from a test (conftest.py's
fixtures call start_server and stop_server). Stdlib only."""
import json
import re
import select
import socket
import subprocess
import time
import urllib.error
import urllib.request


def start_server(binary, extra_args=(), models=("smollm2",), kv_mem="256M", round_sharing=False, host=None,
                 prefix=()):
    """Starts `agentkv serve` on a free port; returns (process, port) once it says where it listens.

    Round sharing is off unless asked for: with it on, the server runs its KV-sharing quality gate per
    model before it listens (minutes on two cores the first time; cached after that). host: the address
    to bind (127.0.0.1 when None); prefix: a command that runs it elsewhere (netns.Hosts.prefix)."""
    model_args = [a for m in models for a in ("-m", m)]
    sharing = [] if round_sharing else ["--round-sharing", "off"]
    bind = ["--host", host] if host else []
    proc = subprocess.Popen([*prefix, binary, "serve", *model_args, *bind, "--port", "0", "--kv-mem", kv_mem,
                             "-t", "2", *sharing, *extra_args], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + (1200 if round_sharing else 120)
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError(f"server exited early (rc={proc.poll()})")
        m = re.search(r"on http://[0-9a-f.:\[\]]+:(\d+)$", line.rstrip())
        if m:
            return proc, int(m.group(1))
    raise RuntimeError("server did not report its port")


def stop_server(proc):
    """SIGTERM, as an operator would; a server that does not exit in a minute is killed."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lowercased names
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))


def parse_response(data):
    """Parses one response from the bytes read until the server closed (or the body was complete)."""
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    lines = data[:head_end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = data[head_end + 4:]
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return Response(status, headers, body)


def exchange(port, raw, half_close=False, timeout=60):
    """Sends raw bytes and returns the first response (None if the server closed without one).

    Sending and reading interleave: a server that answers early (413 before a 10 MB body is read) stops
    the upload instead of being reset by it, and a reset while sending still leaves the answer to read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.setblocking(False)
        sent = 0
        deadline = time.time() + timeout
        while sent < len(raw):
            readable, writable, _ = select.select([s], [s], [], max(0.0, deadline - time.time()))
            if readable or (not writable and time.time() >= deadline):
                break
            try:
                sent += s.send(raw[sent:sent + 65536])
            except (BlockingIOError, InterruptedError):
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        if half_close and sent == len(raw):
            s.shutdown(socket.SHUT_WR)
        data = b""
        while time.time() < deadline:
            readable, _, _ = select.select([s], [], [], max(0.0, deadline - time.time()))
            if not readable:
                break
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            r = parse_response(data)
            if r is not None and "content-length" in r.headers and len(r.body) == int(r.headers["content-length"]):
                return r
        return parse_response(data)
    finally:
        s.close()


def request(port, method, path, body=None, headers=None, timeout=60):
    """A well-formed request; body: bytes, or anything else dumped as JSON."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    hdrs = {"Host": f"127.0.0.1:{port}", "Connection": "close"}
    if body is not None:
        hdrs["Content-Type"] = "application/json"
        hdrs["Content-Length"] = str(len(body))
    for name, value in (headers or {}).items():
        if value is None:
            hdrs.pop(name, None)
        else:
            hdrs[name] = value
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    return exchange(port, head.encode("latin-1") + (body or b""), timeout=timeout)


def metrics(port, headers=None):
    """The model-labelled samples of /metrics as {name: value} (one model served)."""
    r = request(port, "GET", "/metrics", headers=headers)
    assert r is not None and r.status == 200, r and r.status
    return {k: float(v) for k, v in re.findall(r'^(agentkv_\w+)\{model="[^"]*"\} (\S+)$', r.body.decode(), re.M)}


class JsonApi:
    """A JSON client for one server: call() asserts the expected status and returns the decoded body."""

    def __init__(self, port, host="127.0.0.1"):
        self.base = f"http://{host}:{port}"

    def call(self, method, path, body=None, expect=200):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=900) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        assert status == expect, (method, path, status, text)
        return json.loads(text) if text.startswith("{") else text


class ModelMetricsApi(JsonApi):
    """JsonApi with one served model's Prometheus figures from GET /metrics."""

    def __init__(self, port, model, host="127.0.0.1"):
        super().__init__(port, host)
        self.model = model

    def metric(self, name):
        text = self.call("GET", "/metrics")
        m = re.search(r"^%s\{model=\"%s\"\} (\S+)$" % (name, self.model), text, re.M)
        assert m, name
        return float(m.group(1))

    def wait_metric(self, name, pred, what, timeout_s=10):
        """Polls the metric until pred(value) holds (asynchronous releases); fails naming `what`."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            v = self.metric(name)
            if pred(v):
                return v
            time.sleep(0.05)
        raise AssertionError(f"{what}: {name} = {self.metric(name)}")
