"""End to end: the OpenAPI document (docs/openapi.json, served at GET /openapi.json) stays true to the server.

- It is a valid OpenAPI 3.1 document (openapi-spec-validator), and the server serves exactly its bytes,
  under the API key like every endpoint but /health.
- Its paths are the routes the server answers, both ways: the path literals the router and the route
  files compare against (src/server/api_server.cpp, src/server/*_routes.cpp) are the document's paths;
  every documented method of every path reaches its route (not 405, not "no route"), every other method
  is a 405, and paths it does not list are 404.
- Real replies of a real server (smollm2) to each operation, successes and errors, validate against the
  document's schema for their status and content type (jsonschema, draft 2020-12).
"""
import json
import os
import re

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi

import http_raw
from conftest import SRC

DOC_PATH = os.path.join(SRC, "docs", "openapi.json")
KEY = "openapi-e2e-key"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
AUTH = {"Authorization": f"Bearer {KEY}"}


def load_doc():
    with open(DOC_PATH, encoding="utf-8") as f:
        return json.load(f)


def template_of(doc, path):
    """The document's path template that a concrete path matches ({id} is one segment), or None."""
    for t in doc["paths"]:
        if re.fullmatch(re.sub(r"\\\{[^/]+\\\}", "[^/]+", re.escape(t)), path):
            return t
    return None


def response_schema(doc, method, path, status, content_type):
    """The documented schema of this reply (None for a documented reply without a body); fails the test
    when the status or content type is not documented for the operation."""
    t = template_of(doc, path)
    assert t is not None, f"{path} is not in the document"
    op = doc["paths"][t].get(method.lower())
    if op is None and status == 405:  # a method the path does not list (the document's info says so)
        return None if method == "HEAD" else doc["components"]["schemas"]["Error"]
    assert op is not None, f"{method} {t} is not in the document"
    resp = op["responses"].get(str(status)) or op["responses"].get("default")
    assert resp is not None, f"{method} {t}: status {status} is not documented"
    if "$ref" in resp:
        resp = doc["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    content = resp.get("content")
    if not content:
        return None
    media = content.get(content_type)
    assert media is not None, f"{method} {t} {status}: content type {content_type!r} is not documented ({list(content)})"
    return media["schema"]


def check_reply(doc, method, path, r):
    """Validates one reply (http_raw.Response) against the document."""
    assert r is not None, (method, path, "no reply")
    schema = response_schema(doc, method, path, r.status, r.headers.get("content-type", ""))
    if schema is None or method == "HEAD":
        return
    if r.headers.get("content-type") == "text/event-stream":
        # The schema is one event's (as schemathesis reads it): every event valid, each data a JSON
        # object but the last, [DONE].
        events = [{"data": line[6:]} for line in r.body.decode().splitlines() if line.startswith("data: ")]
        assert events and events[-1]["data"] == "[DONE]", events[-3:]
        for ev in events:
            jsonschema.Draft202012Validator(schema).validate(ev)
        for ev in events[:-1]:
            assert isinstance(json.loads(ev["data"]), dict), ev
        return
    if r.headers.get("content-type") != "application/json":
        assert schema.get("type") == "string", schema
        return
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"],
            "allOf": [schema]}
    jsonschema.Draft202012Validator(root).validate(r.json())


@pytest.fixture(scope="module")
def doc():
    return load_doc()


@pytest.fixture(scope="module")
def port(module_servers):
    _, p = module_servers.start(extra_args=["--api-key", KEY, "--chat-sharing", "off"])
    return p


def call(doc, port, method, path, body=None, expect=200, headers=AUTH):
    r = http_raw.request(port, method, path, body=body, headers=headers, timeout=300)
    assert r is not None and r.status == expect, (method, path, r and r.status, r and r.body[:500])
    check_reply(doc, method, path, r)
    return r.json() if r.headers.get("content-type") == "application/json" and method != "HEAD" else r.body


def test_document_is_valid_openapi_and_served_under_the_key(doc, port):
    validate_openapi(doc)
    assert doc["openapi"].startswith("3.1")
    r = http_raw.request(port, "GET", "/openapi.json", headers=AUTH)
    assert r.status == 200 and r.headers["content-type"] == "application/json", r.status
    with open(DOC_PATH, "rb") as f:
        assert r.body == f.read(), "the served document is not docs/openapi.json (rebuild agentkv)"
    call(doc, port, "GET", "/openapi.json", expect=401, headers={})


def source_routes():
    """The path templates the router and the route files compare request paths against."""
    server = os.path.join(SRC, "src", "server")
    text = "".join(open(os.path.join(server, name), encoding="utf-8").read() for name in sorted(os.listdir(server))
                   if name == "api_server.cpp" or name.endswith("_routes.cpp"))
    routes = set(re.findall(r'path == "(/[^"]*)"', text))
    # A prefix routed as a whole (/v1/agents/): {id}, then the actions its route file compares against.
    actions = set(re.findall(r'action [!=]= "(\w+)"', text))
    for prefix in re.findall(r'path\.rfind\("(/[^"]*/)", 0\)', text):
        routes.add(prefix + "{id}")
        routes.update(prefix + "{id}/" + a for a in actions)
    return routes


def test_document_lists_every_route_and_only_those(doc, port):
    assert source_routes() == set(doc["paths"]), (sorted(source_routes()), sorted(doc["paths"]))
    for template, item in doc["paths"].items():
        path = template.replace("{id}", "agent-00000000000000")  # no such agent: nothing is changed
        for method in METHODS:
            body = b"{}" if method in ("POST", "PUT", "PATCH") else None
            r = http_raw.request(port, method, path, body=body, headers=AUTH, timeout=300)
            assert r is not None, (method, path)
            no_route = r.status == 404 and b"no route for" in r.body
            if method.lower() in item:
                assert r.status != 405 and not no_route, (method, path, r.status, r.body[:300])
                check_reply(doc, method, path, r)
            else:
                assert r.status == 405, (method, path, r.status, r.body[:300])
                check_reply(doc, method, path, r)
    for path in ("/", "/v1", "/v1/embeddings", "/v1/agents/", "/v1/agents/a/b/c", "/v1/agents/a/score/x",
                 "/openapi.yaml", "/v1/models/smollm2", "/healthz"):
        r = http_raw.request(port, "GET", path, headers=AUTH)
        assert r.status == 404 and b"no route for" in r.body, (path, r.status, r.body[:300])


def test_real_replies_validate_against_the_document(doc, port):
    call(doc, port, "GET", "/health", headers={})
    call(doc, port, "HEAD", "/health", headers={})
    call(doc, port, "GET", "/v1/models")
    call(doc, port, "GET", "/metrics")
    call(doc, port, "GET", "/v1/models", expect=401, headers={"Authorization": "Bearer wrong"})
    # Completions: text, token ids with logprobs, a stream; errors.
    call(doc, port, "POST", "/v1/completions", {"model": "smollm2", "prompt": "One, two,", "max_tokens": 3,
                                                 "temperature": 0})
    call(doc, port, "POST", "/v1/completions", {"model": "smollm2", "prompt": [1, 2, 3], "max_tokens": 2,
                                                 "logprobs": 2, "n": 2, "seed": -1})
    streamed = call(doc, port, "POST", "/v1/completions", {"model": "smollm2", "prompt": "Hi", "max_tokens": 2,
                                                            "stream": True})
    assert streamed.rstrip().endswith(b"data: [DONE]"), streamed[-200:]
    call(doc, port, "POST", "/v1/completions", {"model": "smollm2"}, expect=400)
    call(doc, port, "POST", "/v1/completions", {"model": "nope", "prompt": "x"}, expect=404)
    call(doc, port, "POST", "/v1/completions", b"{not json", expect=400)
    call(doc, port, "POST", "/v1/completions", {"model": "smollm2", "prompt": "x", "max_tokens": 100000}, expect=400)
    # Chat: plain, logprobs, a forced tool call, a JSON schema answer; errors.
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    call(doc, port, "POST", "/v1/chat/completions", {"model": "smollm2", "messages": msgs, "max_tokens": 3,
                                                      "logprobs": True, "top_logprobs": 2})
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    r = call(doc, port, "POST", "/v1/chat/completions",
             {"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 100,
              "tools": [weather], "tool_choice": "required", "temperature": 0})
    assert r["choices"][0]["message"].get("tool_calls"), r
    call(doc, port, "POST", "/v1/chat/completions",
         {"model": "smollm2", "messages": [{"role": "user", "content": "A number?"}], "max_tokens": 12,
          "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}})
    call(doc, port, "POST", "/v1/chat/completions", {"model": "smollm2", "messages": [{"role": "robot", "content": "x"}]},
         expect=400)
    call(doc, port, "POST", "/v1/chat/completions", {"model": "smollm2", "messages": msgs, "prompt": "x"}, expect=400)
    # Agents, a round, scores.
    a = call(doc, port, "POST", "/v1/agents", {"model": "smollm2", "name": "Ada", "system": "You are Ada."}, expect=201)
    b = call(doc, port, "POST", "/v1/agents", {"model": "smollm2", "name": "Bo", "prefill": False, "ttl_seconds": 60},
             expect=201)
    call(doc, port, "GET", "/v1/agents")
    call(doc, port, "GET", f"/v1/agents/{a['id']}")
    call(doc, port, "POST", f"/v1/agents/{a['id']}/messages", {"messages": [{"role": "user", "content": "Hello."}]})
    call(doc, port, "POST", f"/v1/agents/{a['id']}/respond", {"max_tokens": 3, "temperature": 0})
    fork = call(doc, port, "POST", f"/v1/agents/{a['id']}/fork", {"name": "Ada-2"}, expect=201)
    call(doc, port, "POST", f"/v1/agents/{a['id']}/score", {"steps": ["Step 1: 2 + 2 = 4", "Step 1: 2 + 2 = 5"]})
    # A transfer needs another served model and a map (tests/e2e/transfer_e2e.py checks its 201).
    call(doc, port, "POST", f"/v1/agents/{a['id']}/transfer", {"model": "smollm2"}, expect=400)
    call(doc, port, "POST", f"/v1/agents/{a['id']}/transfer", {"model": "nope"}, expect=404)
    call(doc, port, "POST", "/v1/rounds", {"agents": [a["id"], b["id"]], "shared": "News: it rains.",
                                            "instruction": "Reply in one word.", "max_tokens": 2})
    call(doc, port, "POST", "/v1/rounds", {"agents": [a["id"], a["id"]]}, expect=400)
    call(doc, port, "POST", "/v1/agents", {"model": "smollm2", "colour": "red"}, expect=400)
    call(doc, port, "POST", "/v1/agents", {"model": "nope"}, expect=404)
    call(doc, port, "GET", "/v1/agents/agent-missing", expect=404)
    call(doc, port, "POST", "/v1/agents/agent-missing/respond", {}, expect=404)
    for agent in (a, b, fork):
        call(doc, port, "DELETE", f"/v1/agents/{agent['id']}")
    # Methods and the transport's own errors carry the same Error object.
    call(doc, port, "GET", "/v1/completions", expect=405)
    r = http_raw.request(port, "GET", "/v1/models", headers={**AUTH, "X-Big": "x" * 70000})
    assert r.status == 431, r.status
    check_reply(doc, "GET", "/v1/models", r)
