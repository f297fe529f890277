# The chart scripts under scripts/ (matplotlib), on committed reports: no model, label `unit`. Run by
# the python3 that CMake found importing matplotlib (CMakeLists.txt), the one bench-agents --plot uses.
add_test(NAME scripts.plot_bench_agents
         COMMAND ${agentkv_plot_python} ${CMAKE_SOURCE_DIR}/tests/scripts/plot_bench_agents_test.py)
set_tests_properties(scripts.plot_bench_agents PROPERTIES LABELS unit TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "plot_bench_agents test: ok")
add_test(NAME scripts.plot_transfer_tradeoff
         COMMAND ${agentkv_plot_python} ${CMAKE_SOURCE_DIR}/tests/scripts/plot_transfer_tradeoff_test.py)
set_tests_properties(scripts.plot_transfer_tradeoff PROPERTIES LABELS unit TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "plot_transfer_tradeoff test: ok")
