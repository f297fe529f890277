"""End to end, on both models: structured outputs and tool calls through the official `openai` client,
LangChain and the OpenAI Agents SDK (all from PyPI, pinned in tests/e2e/requirements.txt) against an
`agentkv serve` this module starts (one per model, shared by the model's tests).

- chat.completions.parse with three pydantic models (nested objects, enums, arrays, optional fields)
  for 20 prompts each: every reply parses, and validates against its JSON Schema (jsonschema);
- response_format json_object: every reply is a JSON object;
- tool_choice required and a named function: every reply is a call whose arguments validate against
  the function's parameters; a whole round trip (call, tool result, final answer); a streamed call's
  deltas reassemble into the non-streamed call;
- LangChain's ChatOpenAI (bind_tools, with_structured_output) and an Agents SDK agent with a function
  tool and one with a structured output type, end to end;
- a tool call under a max_tokens below its shortest answer's bytes (but not its tokens) is still a whole,
  valid call within the budget; below its tokens it is a 400 saying how many it needs;
- a schema keyword agentkv cannot compile is a 400 naming it; unknown fields are accepted, and refused
  under --strict-api.
Greedy decoding throughout (temperature 0), so a failure reproduces. The prompts of one test are sent
by 8 client threads at once (the server batches their decode, and its greedy replies do not depend on
the batch): what a framework's concurrent agents do, at a third of the sequential wall time.
"""
import asyncio
import enum
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Literal, Optional

import http_raw
import jsonschema
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

MODELS = ["smollm2", "gemma3"]


class Mood(str, enum.Enum):
    happy = "happy"
    sad = "sad"
    calm = "calm"


class Address(BaseModel):
    city: Annotated[str, Field(max_length=24)]
    country: Annotated[str, Field(max_length=24)]


class Person(BaseModel):  # nested object, enum, integer
    name: Annotated[str, Field(max_length=32)]
    age: int
    mood: Mood
    address: Address


class Item(BaseModel):
    name: Annotated[str, Field(max_length=20)]
    quantity: int
    unit: Literal["kg", "piece", "liter"]


class ShoppingList(BaseModel):  # array of objects with bounds
    store: Annotated[str, Field(max_length=24)]
    items: Annotated[list[Item], Field(min_length=1, max_length=4)]


class Review(BaseModel):  # literal enum, optional (anyOf with null), array of enums
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int
    summary: Optional[Annotated[str, Field(max_length=40)]]
    tags: Annotated[list[Literal["price", "quality", "service", "speed"]], Field(max_length=3)]


PROMPTS = [
    "Describe a baker who lives in Lyon.", "Tell me about a retired sailor from Lisbon.",
    "Invent a young programmer in Tokyo.", "Describe a teacher from Nairobi.",
    "Who is a famous painter from Madrid?", "Describe a farmer in Iowa.",
    "Tell me about a nurse working in Toronto.", "Make up a musician from Vienna.",
    "Describe a student in Cairo.", "Invent a chef from Naples.",
    "I need groceries for pancakes.", "Plan a shopping trip for a picnic.",
    "What should I buy for a soup?", "List what to buy for a birthday party.",
    "Review: the pizza was cold and late.", "Review: great service, fair prices!",
    "Review: the hotel room was fine, nothing special.", "Review: fast delivery but the box was damaged.",
    "Summarise a visit to a museum in Berlin.", "Describe a day at the beach in Sydney.",
]
SCHEMAS = [Person, ShoppingList, Review]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CONVERT = {
    "type": "function",
    "function": {
        "name": "convert_currency",
        "description": "Converts an amount of money from one currency to another.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "to_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
            },
            "required": ["amount", "from_currency", "to_currency"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, CONVERT]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
TOOL_PROMPTS = [
    "What's the weather like in Paris?", "Is it cold in Oslo right now, in fahrenheit?",
    "How much is 120 US dollars in euros?", "Convert 55.5 GBP to JPY.",
    "Weather in Buenos Aires please.", "Should I take an umbrella in London today?",
]
MAX_TOKENS = 400  # above what any of these schemas can take, so a reply is never cut


@pytest.fixture(scope="module", params=MODELS)
def server(request, agentkv):
    # One server per model, stopped before the next model's starts (two servers would share the cores).
    model = request.param
    proc, port = http_raw.start_server(agentkv, models=(model,), kv_mem="512M")
    try:
        yield model, port
    finally:
        http_raw.stop_server(proc)


@pytest.fixture(scope="module")
def client(server):
    _, port = server
    return OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)


def each_concurrently(fn, items, workers=8):
    """fn(item) for every item, from `workers` client threads; the first failure is raised."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(fn, items):
            pass


def check_call(call):
    assert call.type == "function" and call.id, call
    name = call.function.name
    assert name in PARAMS, call
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, PARAMS[name])
    return name, args


def test_parse_pydantic_models(server, client):
    model, _ = server
    json_schemas = {schema: openai.lib._pydantic.to_strict_json_schema(schema) for schema in SCHEMAS}

    def one(case):
        schema, prompt = case
        r = client.chat.completions.parse(model=model, messages=[{"role": "user", "content": prompt}],
                                          response_format=schema, temperature=0, max_tokens=MAX_TOKENS)
        choice = r.choices[0]
        assert choice.finish_reason == "stop", (schema.__name__, prompt, choice)
        assert isinstance(choice.message.parsed, schema), (schema.__name__, prompt, choice.message)
        jsonschema.validate(json.loads(choice.message.content), json_schemas[schema])

    each_concurrently(one, [(schema, prompt) for schema in SCHEMAS for prompt in PROMPTS])


def test_json_object(server, client):
    model, _ = server

    def one(prompt):
        r = client.chat.completions.create(
            model=model, temperature=0, max_tokens=MAX_TOKENS, response_format={"type": "json_object"},
            messages=[{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": prompt}])
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", (prompt, text)
        assert isinstance(json.loads(text), dict), (prompt, text)

    each_concurrently(one, PROMPTS[:10])


def test_tool_choice_required_and_named(server, client):
    model, _ = server

    def one(prompt):
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                           tools=TOOLS, tool_choice="required", temperature=0,
                                           max_tokens=MAX_TOKENS)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, (prompt, choice)
        for call in choice.message.tool_calls:
            check_call(call)
        named = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], tools=TOOLS, temperature=0,
            tool_choice={"type": "function", "function": {"name": "convert_currency"}}, max_tokens=MAX_TOKENS,
            parallel_tool_calls=False)
        calls = named.choices[0].message.tool_calls
        assert named.choices[0].finish_reason == "tool_calls" and len(calls) == 1, (prompt, named.choices[0])
        assert check_call(calls[0])[0] == "convert_currency"

    each_concurrently(one, TOOL_PROMPTS)


def test_round_trip_and_streamed_calls(server, client):
    model, _ = server
    messages = [{"role": "user", "content": "What's the weather in Rome, in celsius?"}]
    first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="required",
                                           temperature=0, max_tokens=MAX_TOKENS)
    calls = first.choices[0].message.tool_calls
    assert calls, first

    # The same request streamed: the deltas build the same calls (names, arguments), with ids.
    built = {}
    finish = None
    for chunk in client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="required",
                                                temperature=0, max_tokens=MAX_TOKENS, stream=True):
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for d in choice.delta.tool_calls or []:
            entry = built.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            if d.id:
                entry["id"] = d.id
            if d.function and d.function.name:
                entry["name"] += d.function.name
            if d.function and d.function.arguments:
                entry["arguments"] += d.function.arguments
    assert finish == "tool_calls", finish
    assert [(c["name"], c["arguments"]) for _, c in sorted(built.items())] == \
        [(c.function.name, c.function.arguments) for c in calls], (built, calls)
    assert all(c["id"] for c in built.values()), built

    # The round trip: the call and its result go back; the answer is text.
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    for c in calls:
        messages.append({"role": "tool", "tool_call_id": c.id, "content": "18 degrees celsius, light rain."})
    final = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="none",
                                           temperature=0, max_tokens=48)
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls, final
    # Under auto the model may answer or call again; either is well formed.
    auto = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="auto",
                                          temperature=0, max_tokens=MAX_TOKENS)
    msg = auto.choices[0].message
    if msg.tool_calls:
        assert auto.choices[0].finish_reason == "tool_calls"
        for c in msg.tool_calls:
            check_call(c)
    else:
        assert msg.content is not None, auto


def test_tool_call_within_a_tight_token_budget(server, client):
    model, _ = server

    def call(max_tokens):
        return client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "What's the weather in Rome, in celsius?"}],
            tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False, temperature=0, max_tokens=max_tokens)

    with pytest.raises(openai.BadRequestError) as e:
        call(1)
    found = re.search(r"its shortest answer is (\d+) tokens \((\d+) bytes\)", str(e.value))
    assert found, e.value
    tokens, size = int(found[1]), int(found[2])
    assert tokens < size, (tokens, size)
    with pytest.raises(openai.BadRequestError):
        call(tokens - 1)
    for budget in sorted({tokens, tokens + 4, (tokens + size) // 2, size - 1}):
        r = call(budget)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1, (budget, choice)
        assert check_call(choice.message.tool_calls[0])[0] == "get_weather", (budget, choice)
        assert r.usage.completion_tokens <= budget, (budget, r.usage)


def test_langchain(server):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    model, port = server
    llm = ChatOpenAI(model=model, base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", temperature=0,
                     max_tokens=MAX_TOKENS, max_retries=0, timeout=600)

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"It is sunny and 21 degrees in {city}."

    # A tool-using agent loop: the model calls, the tool runs, the model answers.
    messages = [HumanMessage("What's the weather in Madrid?")]
    ai = llm.bind_tools([get_weather], tool_choice="required").invoke(messages)
    assert ai.tool_calls and ai.tool_calls[0]["name"] == "get_weather", ai
    assert isinstance(ai.tool_calls[0]["args"].get("city"), str), ai.tool_calls
    messages.append(ai)
    for call in ai.tool_calls:
        messages.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    answer = llm.bind_tools([get_weather], tool_choice="none").invoke(messages)
    assert isinstance(answer.content, str) and answer.content, answer

    person = llm.with_structured_output(Person).invoke("Describe a fisherman who lives in Bergen.")
    assert isinstance(person, Person), person


def test_openai_agents_sdk(server):
    from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool,
                        set_tracing_disabled)
    from openai import AsyncOpenAI

    model, port = server
    set_tracing_disabled(True)
    seen = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        seen.append(city)
        return f"It is sunny and 21 degrees in {city}."

    async def run():
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
        chat_model = OpenAIChatCompletionsModel(model=model, openai_client=client)
        settings = ModelSettings(temperature=0, max_tokens=MAX_TOKENS, tool_choice="required")
        # After a tool call the SDK resets tool_choice to auto, so the agent answers in text or calls
        # again; max_turns bounds it.
        agent = Agent(name="weather", instructions="You answer questions about the weather.", tools=[get_weather],
                      model=chat_model, model_settings=settings, tool_use_behavior="run_llm_again")
        try:
            result = await Runner.run(agent, "What's the weather in Athens?", max_turns=4)
            weather = result.final_output
        except Exception as e:  # only running out of turns is tolerated: the tool must have run
            assert type(e).__name__ == "MaxTurnsExceeded", repr(e)
            weather = None
        structured = Agent(name="profiler", instructions="You describe people.", model=chat_model,
                           model_settings=ModelSettings(temperature=0, max_tokens=MAX_TOKENS), output_type=Person)
        person = (await Runner.run(structured, "Describe a potter who lives in Kyoto.", max_turns=1)).final_output
        await client.close()
        return weather, person

    weather, person = asyncio.run(run())
    assert seen, "the agent never ran its tool"
    assert weather is None or isinstance(weather, str), weather
    assert isinstance(person, Person), person


def test_bad_schema_and_unknown_fields(server, client):
    model, port = server
    bad = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}, "required": ["n"]}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "n", "schema": bad}})
    assert "multipleOf" in str(e.value), e.value
    # Fields that do not change the output are accepted; the server keeps serving.
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                       temperature=0, store=False, metadata={"k": "v"}, service_tier="auto",
                                       prompt_cache_key="abc", user="u1", extra_body={"frobnicate": True})
    assert r.choices[0].message.content is not None


def test_strict_api_refuses_unknown_fields(servers):
    _, port = servers.start(extra_args=["--strict-api"])
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                       extra_body={"frobnicate": True})
    assert "frobnicate" in str(e.value), e.value
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smollm2", max_tokens=2,
                                       messages=[{"role": "user", "content": "hi", "mood": "happy"}])
    assert "mood" in str(e.value), e.value
