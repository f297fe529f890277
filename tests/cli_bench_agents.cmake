# bench-agents end to end on a real model (label `model`): a short debate in both modes must write a
# JSON report whose prefix mode reuses prompt tokens and a PNG; bad options are one-line errors.
add_test(NAME cli.bench_agents_debate_smollm2
         COMMAND bash -c "set -e; $<TARGET_FILE:agentkv> bench-agents -m smollm2 --workload debate --agents 4 --rounds 2 \
           --mode nocache,prefix --kv-mem 256M -q --json ba_debate.json --plot ba_debate.png > ba_debate.txt; \
           python3 -c \"import json,sys; r=json.load(open('ba_debate.json')); m={x['mode']:x['overall'] for x in r['modes']}; \
           assert m['nocache']['prefill_tokens_reused']==0, m; assert m['prefix']['prefill_tokens_reused']>0, m; \
           assert m['prefix']['prefill_tokens_computed']<m['nocache']['prefill_tokens_computed'], m; \
           assert len(r['modes'][1]['rounds'])==2 and all(len(x['replies'])==4 for x in r['modes'][1]['rounds'])\"; \
           head -c 8 ba_debate.png | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'; grep -q '^prefix' ba_debate.txt")
set_tests_properties(cli.bench_agents_debate_smollm2 PROPERTIES LABELS model)

foreach(bad "--workload nope" "--mode turbo" "--kv-mem 12Q" "--kv-mem 1" "--agents 3 --workload debate" "--diff-format int3")
  string(REPLACE " " "_" name "${bad}")
  string(REPLACE "-" "" name "${name}")
  add_test(NAME cli.bench_agents_rejects_${name}
           COMMAND bash -c "out=$($<TARGET_FILE:agentkv> bench-agents -m smollm2 ${bad} -q 2>&1); rc=$?; echo \"$out\"; \
             [ $rc -eq 1 ] && [ $(echo \"$out\" | wc -l) -eq 1 ] && echo \"$out\" | grep -q '^agentkv: error: '")
  set_tests_properties(cli.bench_agents_rejects_${name} PROPERTIES LABELS model)
endforeach()

# --plot checks its interpreter, matplotlib and the script before the model loads: each missing piece is
# a one-line error naming what to install or set (label `unit`: no model is loaded).
foreach(case "AGENTKV_PYTHON=/nonexistent/python3|Debian package python3)"
             "AGENTKV_PYTHON=/bin/false|Debian package python3-matplotlib"
             "AGENTKV_SCRIPTS=/nonexistent|AGENTKV_SCRIPTS")
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 env)
  list(GET case 1 expect)
  string(REGEX REPLACE "[=/]+" "_" name "${env}")
  add_test(NAME cli.bench_agents_plot_needs_${name}
           COMMAND bash -c "out=$(${env} $<TARGET_FILE:agentkv> bench-agents -m smollm2 --workload debate --agents 4 -q \
             --plot x.png 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && [ $(echo \"$out\" | wc -l) -eq 1 ] && \
             echo \"$out\" | grep -q '^agentkv: error: ' && echo \"$out\" | grep -qF '${expect}'")
  set_tests_properties(cli.bench_agents_plot_needs_${name} PROPERTIES LABELS unit)
endforeach()
