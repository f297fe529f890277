# `agentkv inspect` on each committed malformed GGUF (scripts/make_malformed_ggufs.py) must exit 1 with
# exactly one stderr line starting "agentkv: error:", quickly; the valid base must succeed.
set(AGENTKV_CHECK_INSPECT_ERROR ${CMAKE_BINARY_DIR}/check_inspect_error.sh)
file(WRITE ${AGENTKV_CHECK_INSPECT_ERROR} [==[
#!/bin/bash
# usage: check_inspect_error.sh AGENTKV FILE
err_file=$(mktemp)
"$1" inspect "$2" >/dev/null 2>"$err_file"
rc=$?
lines=$(wc -l < "$err_file")
first=$(head -c 15 "$err_file")
cat "$err_file"
rm -f "$err_file"
if [ "$rc" -ne 1 ]; then echo "FAIL: exit code $rc, expected 1"; exit 1; fi
if [ "$lines" -ne 1 ]; then echo "FAIL: $lines stderr lines, expected 1"; exit 1; fi
if [ "$first" != "agentkv: error:" ]; then echo "FAIL: stderr does not start with 'agentkv: error:'"; exit 1; fi
exit 0
]==])

file(GLOB AGENTKV_MALFORMED_GGUFS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/malformed/*.gguf)
foreach(gguf ${AGENTKV_MALFORMED_GGUFS})
  get_filename_component(case ${gguf} NAME_WE)
  add_test(NAME malformed_gguf.${case} COMMAND bash ${AGENTKV_CHECK_INSPECT_ERROR} $<TARGET_FILE:agentkv> ${gguf})
  set_tests_properties(malformed_gguf.${case} PROPERTIES LABELS unit TIMEOUT 1)
endforeach()

add_test(NAME malformed_gguf.valid_small_inspects_ok
         COMMAND $<TARGET_FILE:agentkv> inspect ${CMAKE_SOURCE_DIR}/tests/data/valid_small.gguf)
set_tests_properties(malformed_gguf.valid_small_inspects_ok PROPERTIES LABELS unit TIMEOUT 1)
