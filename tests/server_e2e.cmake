# The server and CLI end to end (tests/e2e), under pytest with the official openai client, both pinned in
# the project's venv (scripts/setup.sh; $AGENTKV_VENV or ~/.cache/agentkv/venv). Each test starts and
# stops the servers it needs (tests/e2e/conftest.py). Labels `e2e` and `model`: they serve the real models.
if(DEFINED ENV{AGENTKV_VENV})
  set(AGENTKV_VENV_PYTHON "$ENV{AGENTKV_VENV}/bin/python")
else()
  set(AGENTKV_VENV_PYTHON "$ENV{HOME}/.cache/agentkv/venv/bin/python")
endif()

# One CTest test per pytest file or node id (tests/e2e/<node>), with its time limit in seconds. The limit
# is also its COST: on a clean clone ctest has no timings yet and would start these longest tests last,
# in index order, leaving one core idle behind the last of them; by cost they start first and the short
# unit and model tests fill the other core around them.
function(agentkv_e2e_test name node timeout)
  add_test(NAME ${name}
           COMMAND ${AGENTKV_VENV_PYTHON} -m pytest -q ${CMAKE_SOURCE_DIR}/tests/e2e/${node}
                   --agentkv $<TARGET_FILE:agentkv>)
  set_tests_properties(${name} PROPERTIES LABELS "e2e;model" TIMEOUT ${timeout} COST ${timeout})
endfunction()

# Chat and text completions through the openai client: greedy equals the CLI, streaming, n, logprobs,
# the prefix cache, errors, a dropped stream freeing its blocks, a clean SIGTERM.
agentkv_e2e_test(server.openai_client_e2e openai_e2e.py 900)

# The agents and rounds API on each model (25 agents, 3 all-gather rounds); stdlib client only. On a
# fresh machine the server first runs its KV-sharing quality gate for both models (once: the two
# tests share the cached result), hence the long timeout.
foreach(model smollm2 gemma3)
  agentkv_e2e_test(server.agents_e2e.${model} "agents_e2e.py::test_agents_and_rounds[${model}]" 2400)
endforeach()

# Each of the committed bad requests (tests/e2e/bad_requests.json) gets its exact 4xx and an OpenAI error
# object, and a good request is served after each. Stdlib Python: raw sockets, not a client library.
agentkv_e2e_test(server.bad_requests_e2e bad_requests_e2e.py 600)

# 64 concurrent streaming clients for 60 s, one request in 8 dropped mid-stream: complete streams for the
# others and, once idle, no KV blocks in use and no requests running.
agentkv_e2e_test(server.load_64_streams_e2e load_e2e.py 600)

# serve -m A -m B, -m A,B: both models listed and answering; a model given twice is a one-line error.
agentkv_e2e_test(cli.serve_repeated_models serve_models_cli.py 600)

# agentkv bench-serve, tiny: in process and against a running server; the JSON report is consistent.
agentkv_e2e_test(cli.bench_serve_smoke bench_serve_cli.py 600)

# KV-PRM step scoring of a resident agent (POST /v1/agents/{id}/score) with a head fitted by fit-prm.
agentkv_e2e_test(server.prm_score_e2e prm_score_e2e.py 900)

# Collective KV sharing in plain chat completions (issue 14) on both models: an 8-agent, 24-turn group
# chat computes at most 40% of kv_sharing false's prefill; recompute 1 and kv_sharing false are byte-exact;
# blended KV is never an exact hit; 8 concurrent chats leak no block, also under a small KV budget; one
# byte of difference is not shared. One test for both models (the servers are shared per model inside the
# file); on a fresh machine the servers first run the chat-sharing quality gate, hence the long timeout.
agentkv_e2e_test(server.chat_sharing_e2e chat_sharing_e2e.py 2400)

# Structured outputs and tool calls (issue 15) on both models: chat.completions.parse with three pydantic
# models for 20 prompts each, json_object, tool_choice required / named, a round trip and streamed call
# deltas, LangChain and the OpenAI Agents SDK end to end (all pinned in tests/e2e/requirements.txt),
# unsupported schema keywords, and --strict-api.
agentkv_e2e_test(server.structured_e2e structured_e2e.py 1800)

# Hostile clients and careless operators (issue 21): a 30 s soak of 300 slowloris and 300 idle sockets beside an
# openai client whose every request is answered, half-closed requests answered, Bearer in any case, empty
# --api-key / --host refused, the key from a file or the environment, SIGTERM draining.
agentkv_e2e_test(server.hostile_e2e hostile_e2e.py 600)

# Admission before work (issue 21): with most of a small KV budget pinned by an agent, completions, chat
# (streamed or not), an agent's turn and a round that cannot fit the unpinned KV are refused at once with
# 507 and Retry-After; one that fits is served, and no block is left behind.
agentkv_e2e_test(server.admission_e2e admission_e2e.py 600)

# The OpenAPI document (docs/openapi.json, served at /openapi.json) stays true: valid OpenAPI 3.1, its paths
# and methods exactly the routes the server answers, and real replies of every operation valid against it.
agentkv_e2e_test(server.openapi_e2e openapi_e2e.py 600)

# schemathesis (pinned) fuzzes a real server from docs/openapi.json for 75 s (examples, coverage, fuzzing and
# stateful phases, fixed seed): no undocumented 5xx, statuses, content types and bodies as documented, nothing
# the document forbids accepted, and the server still answering afterwards.
agentkv_e2e_test(server.fuzz_openapi_e2e fuzz_e2e.py 300)

# The soak of issue 21's acceptance (~50 s): 150 slowloris and 150 idle sockets and rounds of 8 concurrent ~7 MB
# bodies (token ids, chat text, agent appends), beside an openai client whose every chat completion is answered;
# the server's VmRSS / VmHWM stay under the model file + the KV budget + a stated margin.
agentkv_e2e_test(server.soak_e2e soak_e2e.py 300)

# The other families' chat templates and tool calls on the served path (issue 22): tiny random-weight GGUFs
# carrying Llama 3.1's, Qwen2.5's, Qwen3's, Phi-3.5's and Gemma 2's own templates; every golden conversation's
# prompt_tokens equal to the template's rendering, tool_choice required calls in each family's syntax (streamed
# and not) validating against their schema, a round trip, and Llama 3.1's one-call rule and refusals.
agentkv_e2e_test(server.tool_formats_e2e tool_formats_e2e.py 600)

agentkv_e2e_test(server.kv_tier_e2e kv_tier_e2e.py 600)
agentkv_e2e_test(server.kv_cluster_e2e kv_cluster_e2e.py 900)

# Cross-family KV transfer in the server (issue 19): a SmolLM2 -> Gemma 3 map fitted at test time (~12 s),
# serve refusing it for a pair not served or when damaged; an agent's context transferred, the new agent
# answering, the sender unchanged (equal to a twin in another process), share 1 byte-identical to native
# Gemma 3, the metrics and the route's errors.
agentkv_e2e_test(server.transfer_e2e transfer_e2e.py 600)

# Rounds with every turn reading its master + diff context inside attention (issue 17): the gate measures
# that path, 12 SmolLM2 agents run 3 shared rounds, contexts stay compact, a fork answers as its original,
# every block comes back; the same with --master-context agent, and a bad --master-context is a one-line error.
agentkv_e2e_test(server.resume_in_attention_e2e resume_in_attention_e2e.py 1200)

# Echoes (issue 17): with --echo-keep the gate measures the path with them, each agent's answer quoted in the
# next round's block is stored once (agentkv_echo_tokens_total grows), agents answer every round, deleting
# them gives every block back; a bad --echo-keep stops the start with a one-line error.
agentkv_e2e_test(server.echo_e2e echo_e2e.py 900)
