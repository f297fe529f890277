"""Chat templates and tool calls of the other families on the served path (issue 22), with the official
openai client against `agentkv serve` of tiny random-weight GGUFs (scripts/make_arch_ggufs.py
--chat-templates: each file carries its family's own chat template from tests/data/chat_templates/
goldens.json: Llama 3.1's on llama3, Qwen2.5's on qwen2, Qwen3's on qwen3, Phi-3.5's on phi3, Gemma 2's on
gemma2). The weights are random, so what a reply says is noise; what is checked is the format:

- the prompt the server builds is the template's own rendering: a chat request's usage.prompt_tokens
  equals the token count of the golden text (as `agentkv tokenize` counts it) for the same messages
  and tools, for every golden conversation the family's template renders;
- tool_choice "required": the reply is a call in the family's syntax (Llama 3.1: one
  {"name", "parameters"} object; the others: <tool_call> blocks), parsed into message.tool_calls whose
  arguments are JSON that validates against the tool's schema; streamed deltas rebuild the same call;
  the call and its result sent back are accepted;
- Llama 3.1: one call per answer even with parallel_tool_calls, two calls in one earlier assistant
  message refused (400, as its template refuses them), and tool_choice auto with a JSON response_format
  refused (400: a call and the value would start alike).
"""
import json
import os
import subprocess
import sys

import jsonschema
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_raw  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDENS = os.path.join(SRC, "tests", "data", "chat_templates", "goldens.json")
# tiny file -> the template it carries (scripts/make_arch_ggufs.py CHAT_TEMPLATES)
FILES = {"llama3": "llama3.1", "qwen2": "qwen2.5", "qwen3": "qwen3", "phi3": "phi3.5", "gemma2": "gemma2"}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "unit": {"type": "string", "enum": ["C", "F"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
MAX_TOKENS = 128


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    venv_python = sys.executable
    res = subprocess.run([venv_python, os.path.join(SRC, "scripts", "make_arch_ggufs.py"), str(out), "--chat-templates"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return {name: str(out / f"{name}.gguf") for name in FILES}


@pytest.fixture(scope="module")
def goldens():
    with open(GOLDENS, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def server(module_servers, tiny_files):
    _, port = module_servers.start(["--chat-sharing", "off"], models=tuple(tiny_files[n] for n in FILES), kv_mem="128M")
    models = http_raw.request(port, "GET", "/v1/models").json()["data"]
    ids = {}
    for name, path in tiny_files.items():
        stem = os.path.splitext(os.path.basename(path))[0]
        ids[name] = next(m["id"] for m in models if m["id"] in (stem, path, os.path.basename(path)))
    return port, ids


def client_for(port):
    import openai
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=300)


def openai_messages(messages):
    """A golden conversation as a client sends it: call arguments as JSON text."""
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


def token_count(agentkv, path, text):
    res = subprocess.run([agentkv, "tokenize", "-m", path, "--jsonl", "-", "--special", "--bos"],
                         input=json.dumps(text) + "\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return len(json.loads(res.stdout.strip().splitlines()[-1]))


def test_prompt_is_the_templates_rendering(server, goldens, agentkv, tiny_files):
    port, ids = server
    client = client_for(port)
    checked = 0
    for name, template in FILES.items():
        bos = goldens["templates"][template]["bos_token"]
        for case in goldens["cases"]:
            if case["template"] != template or not case["add_generation_prompt"] or "error" in case:
                continue
            text = case["text"][len(bos):] if bos and case["text"].startswith(bos) else case["text"]
            kwargs = {"tools": case["tools"], "tool_choice": "auto"} if case["tools"] else {}
            reply = client.chat.completions.create(model=ids[name], messages=openai_messages(case["messages"]),
                                                   max_tokens=1, temperature=0, **kwargs)
            assert reply.usage.prompt_tokens == token_count(agentkv, tiny_files[name], text), (name, case["label"])
            checked += 1
    assert checked >= 25


def check_call(call, name="get_weather"):
    assert call.type == "function" and call.function.name == name
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


@pytest.mark.parametrize("name", list(FILES))
def test_required_call_streamed_and_round_trip(server, name):
    port, ids = server
    client = client_for(port)
    messages = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Weather in Oslo?"}]
    first = client.chat.completions.create(model=ids[name], messages=messages, tools=[WEATHER], tool_choice="required",
                                           temperature=0, max_tokens=MAX_TOKENS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls and len(choice.message.tool_calls) >= 1
    for call in choice.message.tool_calls:
        check_call(call)
    # The same answer streamed: the deltas rebuild the same calls.
    calls = {}
    for chunk in client.chat.completions.create(model=ids[name], messages=messages, tools=[WEATHER],
                                                tool_choice="required", temperature=0, max_tokens=MAX_TOKENS, stream=True):
        for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            c = calls.setdefault(d.index, {"name": "", "arguments": ""})
            c["name"] += (d.function.name or "") if d.function else ""
            c["arguments"] += (d.function.arguments or "") if d.function else ""
    assert [(c["name"], c["arguments"]) for _, c in sorted(calls.items())] == \
        [(c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    # The call and its result go back.
    call = choice.message.tool_calls[0]
    back = messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "-3 C, snow"}]
    answer = client.chat.completions.create(model=ids[name], messages=back, tools=[WEATHER], tool_choice="none",
                                            temperature=0, max_tokens=8)
    assert answer.choices[0].message.content is not None


def test_llama3_one_call_and_its_refusals(server):
    import openai
    port, ids = server
    client = client_for(port)
    messages = [{"role": "user", "content": "Weather in Oslo and Rome?"}]
    reply = client.chat.completions.create(model=ids["llama3"], messages=messages, tools=[WEATHER],
                                           tool_choice="required", parallel_tool_calls=True, temperature=0,
                                           max_tokens=MAX_TOKENS)
    assert len(reply.choices[0].message.tool_calls) == 1
    check_call(reply.choices[0].message.tool_calls[0])
    two = messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": c, "unit": "C"})}}
        for i, c in enumerate(["Oslo", "Rome"])]}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=ids["llama3"], messages=two, tools=[WEATHER], max_tokens=4)
    assert "one tool call" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=ids["llama3"], messages=messages, tools=[WEATHER], tool_choice="auto",
                                       response_format={"type": "json_object"}, max_tokens=4)
    assert "response_format" in str(e.value)
    # The generic format's models take both: the two answers cannot be confused there.
    ok = client.chat.completions.create(model=ids["qwen2"], messages=messages, tools=[WEATHER], tool_choice="auto",
                                        response_format={"type": "json_object"}, max_tokens=MAX_TOKENS, temperature=0)
    assert ok.choices[0].finish_reason in ("stop", "length", "tool_calls")
