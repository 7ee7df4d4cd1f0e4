#!/bin/sh
# cli_diffusion.sh: job.kind diffusion from the command line: a tiny pipeline (tiny-unet, tiny-vae) runs on
# sim and, its kernels for real, on the host, with every job.diffusion option; the table names its phases;
# sim runs are byte for byte the same; bad settings exit 2 naming file, line and key, and write no JSON.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# scenario DEVICE DIFFUSION [KIND]
scenario() {
    printf 'name: d\ntitle: t\nsource: tests\ndevice: %s\nmodel: { preset: tiny-unet }\njob: { kind: %s, batch_size: 2, image_size: 32, diffusion: { %s }, extras: [ { preset: tiny-vae, role: vae } ] }\nvariants:\n  before: { expect: { oom: false } }\n' \
        "$1" "${3:-diffusion}" "$2" > "$T/s.yaml"
}

for opts in "steps: 2" "steps: 2, images_per_prompt: 2, vae_slicing: true" \
    "steps: 2, vae_tiling: true, tile_size: 8, vae_slicing: true" "steps: 2, tiny_autoencoder: true" \
    "steps: 2, offload: model, attention_slicing: 3" "steps: 2, offload: sequential, attention_slicing: max, vae_upcast: true" \
    "steps: 2, guidance: false, attention_slicing: auto" "steps: 2, height: 48, width: 24, vae_tiling: true, tile_size: 8" \
    "steps: 2, width: 64, vae_slicing: true, images_per_prompt: 2"; do
    scenario host:1GiB "$opts"
    "$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
    ok $rc "host, kernels run for real: { $opts }"
done
ok $(contains "$(cat "$T/out.txt")" "step 1: encode_prompt") "the table gives the pipeline's phases"

scenario sim "steps: 3, vae_slicing: true, offload: model"
"$BIN" run --json "$T/a.json" "$T/s.yaml" > /dev/null 2>&1 && "$BIN" run --json "$T/b.json" "$T/s.yaml" > /dev/null 2>&1
ok $(cmp -s "$T/a.json" "$T/b.json" && echo 0 || echo 1) "a sim run is the same byte for byte"

# bad SETTINGS EXPECTED-MESSAGE
bad() {
    scenario sim "$1" "${3:-}"
    "$BIN" run --json "$T/bad.json" "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
    ok $([ $rc = 2 ] && [ ! -e "$T/bad.json" ] && echo 0 || echo 1) "exit 2 and no JSON for { $1 } (exit $rc)"
    ok $(contains "$(cat "$T/out.txt")" "s.yaml:6:") "it names the file and line"
    ok $(contains "$(cat "$T/out.txt")" "$2") "it says: $2"
}
bad "attention_slicing: some" "job.diffusion.attention_slicing must be off, auto, max or a slice size of at least 1, got 'some'"
bad "offload: disk" "job.diffusion.offload"
bad "steps: 0" "job.diffusion.steps"
bad "tile_overlap: 0.9" "job.diffusion.tile_overlap"
bad "attention_slicing: 5" "job.diffusion.attention_slicing: 5 is more than the 4 heads"
bad "width: 34" "job.diffusion.width: 34 must be a multiple of 4"
bad "steps: 1" "job.kind generate: built for decoder models" generate
scenario sim "steps: 1000" diffusion
sed -i 's/batch_size: 2,/batch_size: 2, steps: 200,/' "$T/s.yaml"
"$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "200 pipeline calls of 1000 steps are refused without --max-forwards (exit $rc)"
ok $(contains "$(cat "$T/out.txt")" "the job runs 200200 forward passes") "  counting each call's steps and decode"
done_testing
