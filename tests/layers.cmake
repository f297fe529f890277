# The layers of ../shared/DESIGN.md, enforced by the build (CMakeLists.txt, agentkv_layer): an include
# against the order must fail to compile, the same machinery must compile an include along it, and
# nothing under src/ may include the lab. Label `unit`: no model.
foreach(probe kv_includes_engine kv_includes_model product_includes_lab)
  add_library(agentkv_probe_${probe} OBJECT EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/tests/layers/${probe}.cpp)
endforeach()
target_link_libraries(agentkv_probe_kv_includes_engine PRIVATE agentkv_kv)
target_link_libraries(agentkv_probe_kv_includes_model PRIVATE agentkv_kv)
target_link_libraries(agentkv_probe_product_includes_lab PRIVATE agentkv_server)

# A violating probe passes only if its build fails on exactly the offending include, so an unrelated
# build failure cannot pass for enforcement (gcc says "x.h: No such file", clang "'x.h' file not found").
add_test(NAME layers.include_against_order_fails_to_build
         COMMAND bash -c "out=$(${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target agentkv_probe_kv_includes_engine 2>&1); rc=$?; \
           echo \"$out\" | tail -5; [ $rc -ne 0 ] && echo \"$out\" | grep -Eq 'engine/engine.h(: No such file|. file not found)'")
add_test(NAME layers.include_along_order_builds
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target agentkv_probe_kv_includes_model)
add_test(NAME layers.product_include_of_lab_fails_to_build
         COMMAND bash -c "out=$(${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target agentkv_probe_product_includes_lab 2>&1); rc=$?; \
           echo \"$out\" | tail -5; [ $rc -ne 0 ] && echo \"$out\" | grep -Eq 'lab/agents/workload.h(: No such file|. file not found)'")
add_test(NAME layers.product_never_includes_lab
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/layers/check_product_includes.py ${CMAKE_SOURCE_DIR})
set_tests_properties(layers.include_against_order_fails_to_build layers.include_along_order_builds
                     layers.product_include_of_lab_fails_to_build layers.product_never_includes_lab
                     PROPERTIES LABELS unit RUN_SERIAL TRUE)
