#!/bin/sh
# fuzz_seed_corpus.sh: fuzz/seed-corpus fills a target's corpus with its committed seeds and regression
# inputs, adds the shared snapshots when ../shared is there, and succeeds without them (a clean clone
# on its own, where `make fuzz-ci` once stopped silently on the pickle target).
. "$(dirname "$0")/tap.shlib"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
committed=$(ls tests/data/fuzz/pickle | wc -l)

OOMLAB_SHARED="$T/no-shared" fuzz/seed-corpus pickle "$T/bare" > "$T/out" 2>&1
ok $? "pickle seeds without the shared snapshots: exit 0"
ok $([ "$(ls "$T/bare" | wc -l)" -eq "$committed" ] && echo 0 || echo 1) \
    "and the corpus holds the $committed committed regression inputs"

mkdir -p "$T/shared/data/pytorch-snapshots"
printf 'x' > "$T/shared/data/pytorch-snapshots/a.pickle"
OOMLAB_SHARED="$T/shared" fuzz/seed-corpus pickle "$T/with" > "$T/out" 2>&1
ok $? "pickle seeds with a shared snapshot: exit 0"
ok $([ "$(ls "$T/with" | wc -l)" -eq $((committed + 1)) ] && echo 0 || echo 1) "and the snapshot is added"

OOMLAB_SHARED="$T/no-shared" fuzz/seed-corpus size "$T/size" > "$T/out" 2>&1
ok $? "size seeds (no shared input): exit 0"
done_testing
