#!/bin/sh
# cli_check.sh: `oomlab check`, the CI gate. A fresh run of scenarios/ matches the committed baseline; on
# hand-made results documents: a peak 3% above the baseline fails at the default 2% and passes at 5%, a job
# that fitted and now OOMs fails, a job gone fails, a new job does not, modelled samples/s that drop fail
# and measured ones are not gated; JUnit XML names the failing job; bad documents exit 2.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

out=$("$BIN" check --baseline results/run.json scenarios/ 2>&1); rc=$?
ok $rc "a fresh run of scenarios/ passes the gate against results/run.json"
jobs=$(grep -c '"failed":' results/run.json)
ok $(contains "$out" "$jobs jobs against the baseline, tolerance 2%: 0 regressed") "and says what it compared ($jobs jobs)"

# doc FILE GROUP JOB PEAK_RESERVED OOM(true|false) SAMPLES_PER_S FIGURES [VERSION]
doc() {
    oom=null; [ "$5" = true ] && oom='{"phase": "forward"}'
    cat > "$1" <<DOC
{"schema": "oomlab-results", "schema_version": ${8:-1}, "command": "run", "groups": [
  {"kind": "scenario", "name": "$2", "jobs": [
    {"name": "$3", "figures": "$7", "oom": $oom,
     "stats": {"allocated_bytes.all.peak": 1000000000, "reserved_bytes.all.peak": $4},
     "throughput": {"samples_per_s": $6}}]}]}
DOC
}
doc "$T/base.json" s v 10000000000 false 100 modelled
doc "$T/up3.json" s v 10300000000 false 100 modelled
out=$("$BIN" check --baseline "$T/base.json" --results "$T/up3.json" --junit "$T/j.xml" 2>&1); rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "a peak 3% above the baseline fails at the default 2% (exit $rc)"
ok $(contains "$out" "s/v                                      peak reserved      9.31 GiB     9.59 GiB    +3.0%  REGRESSED") "and says which figure, in GiB"
ok $(grep -q '<failure type="regression beyond 2%" message="peak reserved: 9.31 GiB -&gt; 9.59 GiB"' "$T/j.xml" && echo 0 || echo 1) "JUnit XML has the failure"
out=$("$BIN" check --tolerance 5% --baseline "$T/base.json" --results "$T/up3.json" 2>&1); rc=$?
ok $rc "the same 3% passes at --tolerance 5%"
"$BIN" check --tolerance 0.05 --baseline "$T/base.json" --results "$T/up3.json" > /dev/null 2>&1
ok $? "--tolerance 0.05 is 5% too"
doc "$T/oom.json" s v 10000000000 true 0 modelled
"$BIN" check --baseline "$T/base.json" --results "$T/oom.json" > /dev/null 2>&1
ok $([ $? = 1 ] && echo 0 || echo 1) "a job that fitted and now OOMs fails"
doc "$T/slow.json" s v 10000000000 false 90 modelled
"$BIN" check --baseline "$T/base.json" --results "$T/slow.json" > /dev/null 2>&1
ok $([ $? = 1 ] && echo 0 || echo 1) "modelled samples/s 10% lower fail"
doc "$T/mbase.json" s v 10000000000 false 100 measured
doc "$T/mslow.json" s v 10000000000 false 50 measured
"$BIN" check --baseline "$T/mbase.json" --results "$T/mslow.json" > /dev/null 2>&1
ok $? "measured samples/s are not gated"
doc "$T/other.json" s w 10000000000 false 100 modelled
out=$("$BIN" check --baseline "$T/base.json" --results "$T/other.json" 2>&1); rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "a job gone fails"
ok $(contains "$out" "MISSING") "and is named missing"
ok $(contains "$out" "new") "a new job is named, not failed"
doc "$T/v2.json" s v 10000000000 false 100 modelled 2
out=$("$BIN" check --baseline "$T/v2.json" --results "$T/base.json" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "another schema version exits 2"
ok $(contains "$out" "has results schema version 2; this oomlab reads version 1") "and says so"
printf '{"schema": ' > "$T/broken.json"
out=$("$BIN" check --baseline "$T/broken.json" --results "$T/base.json" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a broken baseline exits 2"
ok $(contains "$out" "broken.json:1:") "naming its position"
"$BIN" check --baseline "$T/base.json" --tolerance 5 --results "$T/base.json" > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "--tolerance 5 (no % sign) is refused, not read as 500%"
done_testing
