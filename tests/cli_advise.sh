#!/bin/sh
# cli_advise.sh: `oomlab advise`. On a scenario that OOMs: every fix tried, what fits ranked first, then by
# samples/s; fixes that change nothing say why; the top answer really fits when run. On a real snapshot:
# the least capacity each setting needs, and a replay at that capacity holds while 2 MiB less OOMs; the
# smallest card is proven by a replay on it. Bad input exits 2 and writes nothing.
BIN=${OOMLAB_BIN:-build/oomlab}
SHARED=${OOMLAB_SHARED:-../shared}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

out=$("$BIN" advise --json "$T/a.json" scenarios/unreleased_gradients.yaml 2>&1); rc=$?
ok $rc "advise on a scenario whose job OOMs: exit 0 when a fix fits"
ok $(contains "$out" "as it is (before): OOM: backward, step 1") "it says how the job fails as it is"
ok $(contains "$out" "ranked: what fits first, then the highest samples/s, then the lowest peak reserved") "and how it ranks"
first=$(printf '%s\n' "$out" | awk '$1 == "1" { print; exit }')
ok $(contains "$first" "fits") "rank 1 fits ($first)"
# fitting rows: samples/s never rises down the ranking
printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && $2 == "fits" { if (seen && $5 > last + 1e-9) bad = 1; last = $5; seen = 1 }
    END { exit bad }'
ok $? "fitting rows fall in samples/s down the ranking"
ok $(contains "$out" "convert_once: the job keeps no second copy of the weights") "a fix that cannot act here says why"
ok $(contains "$out" "zero_grad_set_to_none: the job OOMs (backward, step 1) before it acts") "one that acts after the OOM says so"
ok $([ -s "$T/a.json" ] && grep -q '"name": "rank-1"' "$T/a.json" && echo 0 || echo 1) "--json writes the candidates, rank-1 first"

# the top answer, applied by hand, fits: the advice is a run, not a guess
printf '%s\n' "$out" | sed -n '/^   rank 1 as a scenario variant (YAML):$/,/expect:/p' | tail -n +2 | sed 's/^   //' > "$T/variant"
awk 'FNR == NR { v = v $0 "\n"; next } { print } /^variants:$/ { printf "%s", v }' "$T/variant" \
    scenarios/unreleased_gradients.yaml > "$T/fixed.yaml"
"$BIN" run "$T/fixed.yaml" > "$T/fixed.txt" 2>&1
ok $(grep -q "^   after-advised .* fits" "$T/fixed.txt" && echo 0 || echo 1) "the variant it prints ($(tr -s ' \n' ' ' < "$T/variant")) fits when run"

snap="$SHARED/data/pytorch-snapshots/HugePandaCoder_octree-nca-groupeq__my_snapshot_1e496ac.pickle"
if [ -f "$snap" ]; then
    out=$("$BIN" advise "$snap" 2>&1); rc=$?
    ok $rc "advise on a real snapshot: exit 0"
    ok $(contains "$out" "as recorded, PyTorch's defaults: needs 15.20GiB (reserves 19.43 GiB when never pressed)") \
        "it finds the least capacity, well below the unpressed peak"
    "$BIN" replay --capacity 15.20GiB "$snap" > /dev/null 2>&1
    ok $? "a replay at 15.20GiB holds"
    "$BIN" replay --capacity 15.18GiB "$snap" > /dev/null 2>&1
    ok $([ $? = 1 ] && echo 0 || echo 1) "2 MiB less OOMs (exit 1)"
    line=$(printf '%s\n' "$out" | grep "max_split_size_mb:128 ")
    ok $(contains "$line" "13.44GiB -11.6% t4") "max_split_size_mb:128 needs 13.44GiB, fits a t4 ($line)"
    "$BIN" replay --device sim:t4 --alloc-conf max_split_size_mb:128 "$snap" > /dev/null 2>&1
    ok $? "and a replay on sim:t4 under it holds"
    "$BIN" replay --device sim:t4 "$snap" > /dev/null 2>&1
    ok $([ $? = 1 ] && echo 0 || echo 1) "where the recorded settings OOM on a t4"
else
    echo "# skip: $snap not found (set OOMLAB_SHARED)"
fi

# bad input: exit 2, a clear message, nothing written
"$BIN" advise > /dev/null 2> "$T/err"; rc=$?
ok $([ $rc = 2 ] && grep -q "expected one scenario, snapshot or trace" "$T/err" && echo 0 || echo 1) "no file: exit 2"
"$BIN" advise --json "$T/none.json" "$T/missing.yaml" > /dev/null 2> "$T/err"; rc=$?
ok $([ $rc = 2 ] && [ ! -e "$T/none.json" ] && echo 0 || echo 1) "a missing scenario: exit 2, no JSON written"
printf 'not a trace\n' > "$T/junk.txt"
"$BIN" advise "$T/junk.txt" > /dev/null 2> "$T/err"; rc=$?
ok $([ $rc = 2 ] && grep -q "junk.txt" "$T/err" && echo 0 || echo 1) "a malformed trace: exit 2 naming the file ($(head -c 120 "$T/err"))"
# a fix that changes nothing alone because the job runs out of memory before it acts (gradient
# checkpointing when Flux's text encoders do not even load) is still tried on top of one that helps
out=$("$BIN" advise scenarios/flux_lora_text_encoders.yaml 2>/dev/null)
ok $(printf '%s\n' "$out" | awk '$1 == "1" && $2 == "fits" { f = 1 } END { exit !f }' && contains "$out" "gradient_checkpointing +" | grep -q 0 && contains "$out" "offload_text_encoder" | grep -q 0 && echo 0 || echo 1) \
    "Flux LoRA: advise finds offload + gradient checkpointing, which fit together though checkpointing alone changes nothing"
done_testing
