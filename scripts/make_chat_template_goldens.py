#!/usr/bin/env python3
"""Writes tests/data/chat_templates/goldens.json: what the chat templates of the model families agentkv
loads render for a set of conversations (plain turns, system prompts, tools offered, tool calls and
their results, Qwen3's thinking blocks), checked by tests/unit/chat_template_golden_test.cpp against
agentkv's native renderers (src/tokenizer/chat_format_*.cpp). agentkv runs no Jinja; this is the
reference it is held to.

The templates are the ones llama.cpp keeps for its own template tests (models/templates/*.jinja in the
llama-cpp-python 0.3.36 sdist from PyPI: the models' tokenizer_config.json templates, as their GGUF
files carry them in tokenizer.chat_template). They are rendered the way Hugging Face transformers'
apply_chat_template renders them (transformers/utils/chat_template_utils.py): jinja2 with trim_blocks,
lstrip_blocks and the loop-controls extension, `tojson` as json.dumps(ensure_ascii=False, sort_keys=False)
with optional indent, raise_exception, and strftime_now (fixed here to DATE, which the test passes to the
renderer as the date). The goldens record each template's text and sha256 (the test detects the format
from the text, as agentkv does from a GGUF), the conversation, and the rendered text or the template's
error.

Usage (jinja2 from PyPI, as scripts/build_llamacpp_reference.sh installs it; the sdist as that script unpacks it):
  python3 scripts/make_chat_template_goldens.py [--sdist /tmp/llamacpp-ref/llama_cpp_python-0.3.36]
"""
import argparse
import datetime
import hashlib
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "chat_templates", "goldens.json")
DATE = datetime.date(2026, 3, 7)  # "07 Mar 2026": a day number below 10 checks the zero padding

# name: (file under models/templates, bos_token, eos_token)
TEMPLATES = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.3": ("meta-llama-Llama-3.3-70B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "phi3.5": ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
    "gemma2": ("google-gemma-2-2b-it.jinja", "<bos>", "<eos>"),
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. \"Oslo\""},
                           "unit": {"type": "string", "enum": ["C", "F"]}},
            "required": ["city"],
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "time_now", "description": "Local time (é, ü).",
                                           "parameters": {"type": "object", "properties": {}}}}


def call(i, name, args):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


# (label, messages, tools or None, families it applies to or None for all)
CONVERSATIONS = [
    ("one user turn", [{"role": "user", "content": "Hello"}], None, None),
    ("system and turns", [{"role": "system", "content": "You are terse."},
                          {"role": "user", "content": "Hi there "},
                          {"role": "assistant", "content": " Hello! How can I help?"},
                          {"role": "user", "content": "Name a colour.\n"}], None, None),
    ("alternating turns", [{"role": "user", "content": "1 + 1?"}, {"role": "assistant", "content": "2"},
                           {"role": "user", "content": "Twice that?"}], None, None),
    ("tools offered", [{"role": "system", "content": "Use tools when they help."},
                       {"role": "user", "content": "Weather in Oslo?"}], [WEATHER, CLOCK], {"qwen", "llama"}),
    ("tools, no system", [{"role": "user", "content": "What time is it?"}], [CLOCK], {"qwen", "llama"}),
    ("a call and its result", [{"role": "user", "content": "Weather in Oslo?"},
                               {"role": "assistant", "content": "",
                                "tool_calls": [call(1, "get_weather", {"city": "Oslo", "unit": "C"})]},
                               {"role": "tool", "tool_call_id": "call_1", "content": "-3 C, snow"}],
     [WEATHER], {"qwen", "llama"}),
    ("two calls, two results", [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Oslo and Rome?"},
                                {"role": "assistant", "content": "Checking both.",
                                 "tool_calls": [call(1, "get_weather", {"city": "Oslo"}),
                                                call(2, "get_weather", {"city": "Rome"})]},
                                {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
                                {"role": "tool", "tool_call_id": "call_2", "content": "14 C"},
                                {"role": "assistant", "content": "Oslo -3 C, Rome 14 C."},
                                {"role": "user", "content": "Thanks"}], [WEATHER], {"qwen", "llama"}),
    ("thinking in history", [{"role": "user", "content": "2 + 2?"},
                             {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
                             {"role": "user", "content": "And 3 + 3?"},
                             {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6"}], None, {"qwen"}),
]


def family(name):
    return "qwen" if name.startswith("qwen") else "llama" if name.startswith("llama") else name


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return DATE.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdist", default="/tmp/llamacpp-ref/llama_cpp_python-0.3.36")
    args = ap.parse_args()
    tdir = os.path.join(args.sdist, "vendor", "llama.cpp", "models", "templates")
    env = environment()
    out = {"source": "llama-cpp-python 0.3.36 sdist (PyPI), vendor/llama.cpp/models/templates",
           "renderer": "jinja2 %s as transformers' apply_chat_template" % jinja2.__version__,
           "date": DATE.strftime("%d %b %Y"), "templates": {}, "cases": []}
    for name, (fname, bos, eos) in TEMPLATES.items():
        with open(os.path.join(tdir, fname), encoding="utf-8") as f:
            text = f.read()
        out["templates"][name] = {"file": fname, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                                  "bos_token": bos, "eos_token": eos, "text": text}
        tmpl = env.from_string(text)
        for label, messages, tools, families in CONVERSATIONS:
            if families is not None and family(name) not in families:
                continue
            if name == "gemma2" and messages[0]["role"] == "system":
                continue  # Gemma 2's template refuses a system message; agentkv opens the first turn with it (as Gemma 3's does)
            for gen in (True, False):
                case = {"template": name, "label": label, "messages": messages, "tools": tools,
                        "add_generation_prompt": gen}
                try:
                    kwargs = {"messages": messages, "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos}
                    if tools is not None:
                        kwargs["tools"] = tools
                    case["text"] = tmpl.render(**kwargs)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                out["cases"].append(case)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(out['cases'])} cases over {len(TEMPLATES)} templates")


if __name__ == "__main__":
    main()
