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

# The agents and rounds API on each model (25 agents, 3 all-gather rounds); stdlib client only.
foreach(model smollm2 gemma3)
  add_test(NAME server.agents_e2e.${model}
           COMMAND ${AGENTKV_VENV_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/agents_e2e.py $<TARGET_FILE:agentkv> ${model})
  set_tests_properties(server.agents_e2e.${model} PROPERTIES LABELS model TIMEOUT 1500
                       PASS_REGULAR_EXPRESSION "agents e2e ${model}: ok")
endforeach()
