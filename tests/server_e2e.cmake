# The server end to end with the official openai client (from PyPI, installed by scripts/setup.sh into
# $AGENTKV_VENV or ~/.cache/agentkv/venv). Label `model`: it serves SmolLM2.
if(DEFINED ENV{AGENTKV_VENV})
  set(AGENTKV_VENV_PYTHON "$ENV{AGENTKV_VENV}/bin/python")
else()
  set(AGENTKV_VENV_PYTHON "$ENV{HOME}/.cache/agentkv/venv/bin/python")
endif()
add_test(NAME server.openai_client_e2e
         COMMAND ${AGENTKV_VENV_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/openai_e2e.py $<TARGET_FILE:agentkv>)
set_tests_properties(server.openai_client_e2e PROPERTIES LABELS model TIMEOUT 900 PASS_REGULAR_EXPRESSION "openai e2e: ok")

# The agents and rounds API on each model (25 agents, 3 all-gather rounds); stdlib client only. On a
# fresh machine the server first runs its KV-sharing quality gate for both models (once: the two
# tests share the cached result), hence the long timeout.
foreach(model smollm2 gemma3)
  add_test(NAME server.agents_e2e.${model}
           COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/agents_e2e.py $<TARGET_FILE:agentkv> ${model})
  set_tests_properties(server.agents_e2e.${model} PROPERTIES LABELS model TIMEOUT 2400
                       PASS_REGULAR_EXPRESSION "agents e2e ${model}: ok")
endforeach()

# Each of the committed bad requests (tests/e2e/bad_requests.json) gets its exact 4xx and an OpenAI error
# object, and a good request is served after each. Stdlib Python: raw sockets, not a client library.
add_test(NAME server.bad_requests_e2e
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/bad_requests_e2e.py $<TARGET_FILE:agentkv>)
set_tests_properties(server.bad_requests_e2e PROPERTIES LABELS model TIMEOUT 600 PASS_REGULAR_EXPRESSION "bad requests e2e: ok")

# 64 concurrent streaming clients for 60 s, one request in 8 dropped mid-stream: complete streams for the
# others and, once idle, no KV blocks in use and no requests running.
add_test(NAME server.load_64_streams_e2e
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/load_e2e.py $<TARGET_FILE:agentkv> 60 64)
set_tests_properties(server.load_64_streams_e2e PROPERTIES LABELS model TIMEOUT 600 PASS_REGULAR_EXPRESSION "load e2e: ok")

# serve -m A -m B, -m A,B: both models listed and answering; a model given twice is a one-line error.
add_test(NAME cli.serve_repeated_models
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/serve_models_cli.py $<TARGET_FILE:agentkv>)
set_tests_properties(cli.serve_repeated_models PROPERTIES LABELS model TIMEOUT 600 PASS_REGULAR_EXPRESSION "serve models cli: ok")

# agentkv bench-serve, tiny: in process and against a running server; the JSON report is consistent.
add_test(NAME cli.bench_serve_smoke
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/bench_serve_cli.py $<TARGET_FILE:agentkv>)
set_tests_properties(cli.bench_serve_smoke PROPERTIES LABELS model TIMEOUT 600 PASS_REGULAR_EXPRESSION "bench-serve cli: ok")

# KV-PRM step scoring of a resident agent (POST /v1/agents/{id}/score) with a head fitted by fit-prm.
add_test(NAME server.prm_score_e2e
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/e2e/prm_score_e2e.py $<TARGET_FILE:agentkv> ${CMAKE_BINARY_DIR}/prm_score_e2e)
set_tests_properties(server.prm_score_e2e PROPERTIES LABELS model TIMEOUT 900 PASS_REGULAR_EXPRESSION "prm score e2e: ok")
