# End-to-end runs of the agentkv binary on the real models (label `model`).
add_test(NAME cli.generate_smollm2_paris
         COMMAND $<TARGET_FILE:agentkv> generate -m smollm2 -p "The capital of France is" -n 16 -q)
set_tests_properties(cli.generate_smollm2_paris PROPERTIES LABELS model PASS_REGULAR_EXPRESSION "Paris")

# The chat form of the question: SmolLM2-135M-Instruct answers it (greedy) with "L'Étoile, ..." under
# llama.cpp as well (tests/data/generate/goldens.json); we require the same opening.
add_test(NAME cli.generate_smollm2_chat_matches_llamacpp
         COMMAND $<TARGET_FILE:agentkv> generate -m smollm2 --chat -p "What is the capital of France?" -n 8 -q)
set_tests_properties(cli.generate_smollm2_chat_matches_llamacpp PROPERTIES LABELS model
                     PASS_REGULAR_EXPRESSION "^L'Étoile, la")

add_test(NAME cli.generate_gemma3_paris
         COMMAND $<TARGET_FILE:agentkv> generate -m gemma3 -p "The capital of France is" -n 16 -q)
set_tests_properties(cli.generate_gemma3_paris PROPERTIES LABELS model PASS_REGULAR_EXPRESSION "the capital of the country of France")

add_test(NAME cli.tokenize_rejects_bad_json
         COMMAND bash -c "printf '\"ok\"\\n{bad\\n' > tokenize_bad.jsonl; $<TARGET_FILE:agentkv> tokenize -m smollm2 --jsonl tokenize_bad.jsonl")
set_tests_properties(cli.tokenize_rejects_bad_json PROPERTIES LABELS model WILL_FAIL TRUE)

add_test(NAME cli.unknown_model_is_one_line_error
         COMMAND bash -c "out=$($<TARGET_FILE:agentkv> generate -m no-such-model -p hi 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && [ $(echo \"$out\" | wc -l) -eq 1 ]")
set_tests_properties(cli.unknown_model_is_one_line_error PROPERTIES LABELS unit)

foreach(model smollm2 gemma3)
  add_test(NAME cli.tokenize_${model}_matches_llamacpp
           COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli_tokenize_check.py $<TARGET_FILE:agentkv> ${model})
  set_tests_properties(cli.tokenize_${model}_matches_llamacpp PROPERTIES LABELS model)
endforeach()

add_test(NAME cli.generate_stop_string
         COMMAND $<TARGET_FILE:agentkv> generate -m smollm2 -p "The capital of France is" -n 16 -q --stop "."
)
# Greedy continuation is " Paris.\n\nThe United States ..." — the stop string cuts it right before the dot.
set_tests_properties(cli.generate_stop_string PROPERTIES LABELS model PASS_REGULAR_EXPRESSION "^ Paris\n$")

# Bad options are one-line errors naming the option (label `model`: the model loads first). `bads`:
# "options|what the error names" entries; `command` ends where the options go, `tail` follows them.
function(add_cli_rejects prefix command tail)
  foreach(bad ${ARGN})
    string(REPLACE "|" ";" bad "${bad}")
    list(GET bad 0 opts)
    list(GET bad 1 names)
    string(REPLACE " " "_" name "${opts}")
    string(REPLACE "-" "" name "${name}")
    add_test(NAME cli.${prefix}_${name}
             COMMAND bash -c "out=$(${command} ${opts} ${tail} 2>&1); rc=$?; \
               echo \"$out\"; [ $rc -eq 1 ] && [ $(echo \"$out\" | wc -l) -eq 1 ] && echo \"$out\" | grep -q -- '^agentkv: error: .*${names}'")
    set_tests_properties(cli.${prefix}_${name} PROPERTIES LABELS model)
  endforeach()
endfunction()

add_cli_rejects(fit_prm_lora_rejects "$<TARGET_FILE:agentkv> fit-prm -m smollm2 --lora" "--train 1 --heldout 0"
                "--loss nope|--loss" "--average 1|--average" "--epochs 0|--epochs" "--batch 0|--batch"
                "--solutions --mc-rollouts 2|--mc-rollouts" "--solutions --steps x.tsv|--steps"
                "--references 1|--references" "--solutions --references 4|--references"
                "--answers --solutions|--answers" "--answers --mc-rollouts 2|--answers" "--dump x.tsv|--dump"
                "--offered-answers|--offered-answers")
# search's --score-at: a name it knows, and bestofn only (a beam ranks partial solutions step by step).
add_cli_rejects(search_rejects "$<TARGET_FILE:agentkv> search -m smollm2" "--problems 1"
                "--score-at nope|--score-at" "--method beam --score-at solution|--score-at solution"
                "--method nope|--method" "--method beam,beam|named twice"
                "--method bestofn --scorer beam:kvprm|needs --method beam"
                "--method bestofn,beam --scorer vote|beam:" "--method bestofn,beam --scorer beam:vote|--scorer"
                "--offer-answer|--offer-answer")
