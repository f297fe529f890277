# The CLI refuses special files, inputs without bound and budgets the machine cannot hold, quickly and
# with a clear message, before any model loads (so these need no model): tests/cli_refuses.sh checks
# a non-zero exit, no hang (TIMEOUT) and the message.
function(agentkv_cli_refuses name regex)
  add_test(NAME cli.refuses_${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_refuses.sh "${regex}" $<TARGET_FILE:agentkv> ${ARGN})
  set_tests_properties(cli.refuses_${name} PROPERTIES TIMEOUT 30)
endfunction()

set(_pair --from smollm2 --to gemma3 --map @FIFO@)
agentkv_cli_refuses(sender_cache_fifo "--sender-cache .*: a FIFO, not a regular file" transfer-generate ${_pair} --sender-cache @FIFO@)
agentkv_cli_refuses(sender_cache_directory "--sender-cache .*: a directory, not a regular file" transfer-generate ${_pair} --sender-cache @DIR@)
agentkv_cli_refuses(tokenize_dev_zero "--jsonl /dev/zero: a character device, not a regular file" tokenize -m smollm2 --jsonl /dev/zero)
agentkv_cli_refuses(tokenize_fifo "--jsonl .*: a FIFO, not a regular file" tokenize -m smollm2 --jsonl @FIFO@)
agentkv_cli_refuses(perplexity_dev_zero "-f /dev/zero: a character device" perplexity -m smollm2 -f /dev/zero)
agentkv_cli_refuses(kv_save_context_directory "--context .*: a directory" kv-save -m smollm2 --context @DIR@ --out @DIR@/x.gguf)
agentkv_cli_refuses(threads_over_hardware "-t 100000 is more than the [0-9]+ hardware threads" generate -m smollm2 -p hi -t 100000)
agentkv_cli_refuses(serve_threads_over_hardware "-t 100000 is more than the [0-9]+ hardware threads" serve -t 100000)
agentkv_cli_refuses(kv_mem_over_machine "--kv-mem .* is more than this machine can hold: .* is [0-9.]+ [KMGT]iB" serve --kv-mem 1000000G)
agentkv_cli_refuses(kv_disk_max_without_dir "--kv-disk-max needs --kv-disk DIR" serve --kv-disk-max 1G)
agentkv_cli_refuses(kv_disk_max_malformed "--kv-disk-max: invalid byte size '1Q'" serve --kv-disk @DIR@ --kv-disk-max 1Q)
agentkv_cli_refuses(kv_redis_no_port "--kv-redis: Redis node 'localhost': no port" serve --kv-redis localhost)
agentkv_cli_refuses(kv_redis_bad_port "--kv-redis: Redis node 'h:70000': port is not a number" serve --kv-redis 127.0.0.1:6379,h:70000)
agentkv_cli_refuses(api_key_file_fifo "--api-key-file .*: a FIFO, not a regular file" serve --api-key-file @FIFO@)
