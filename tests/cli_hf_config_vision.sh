#!/bin/sh
# cli_hf_config_vision.sh: `oomlab fit --hf-config` on vision transformers' config.json (model_type vit,
# clip, clip_vision_model; hf_config_vision.c). The shipped configs are written from the published ones
# (google/vit-base-patch16-224 with its 1000 labels, named LABEL_i here; openai/clip-vit-large-patch14):
# exact parameter counts, a batch answer at the config's image size; bad fields exit 2 naming them.
BIN=${OOMLAB_BIN:-build/oomlab}
D=$(dirname "$0")/data/hf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# ViTForImageClassification 86,567,656; CLIPModel's vision tower with visual_projection (768 x 1024):
# 303,179,776 + 786,432
for c in vit-base-patch16-224:vit:86567656 clip-vit-large-patch14:clip_vision:303966208; do
    name=${c%%:*}; rest=${c#*:}; fam=${rest%%:*}; want=${rest#*:}
    out=$("$BIN" fit --hf-config "$D/$name.json" 2> "$T/$name.err"); rc=$?
    echo "$out" > "$T/$name.out"
    ok $(contains "$out" "$D/$name.json: $fam, $want parameters (modelled") "$name: $fam, $want parameters"
    ok $(contains "$out" "image_size 224") "$name: trained at the config's image size, 224"
    b=$(echo "$out" | awk '$1 == "hf-config" { print $2 }')
    ok $([ $rc = 0 ] && [ -n "$b" ] && [ "$b" -ge 1 ] && echo 0 || echo 1) "$name: fits at batch $b (exit $rc)"
done
ok $(contains "$(cat "$T/clip-vit-large-patch14.out")" "the text tower is not") "clip: its assumptions say the text tower is not built"

# the same configs in other forms
vit=$D/vit-base-patch16-224.json
check_count() { # FILE COUNT WHAT
    out=$("$BIN" fit --hf-config "$1" --param batch_size 2>&1)
    ok $(contains "$out" "$2 parameters") "$3: $2 parameters"
}
sed 's/"ViTForImageClassification"/"ViTModel"/' "$vit" > "$T/vitmodel.json"
check_count "$T/vitmodel.json" $((86567656 - 769000 + 768 * 768 + 768)) "ViTModel: no classifier, its pooler"
sed 's/"id2label": {.*}/"num_labels": 102/' "$vit" > "$T/flowers.json"
check_count "$T/flowers.json" $((86567656 - 769000 + 102 * 769)) "num_labels 102 (flowers102)"
sed 's/"id2label": {.*}/"image_size": 224/' "$vit" > "$T/twolabels.json"
check_count "$T/twolabels.json" $((86567656 - 769000 + 2 * 769)) "no id2label: PretrainedConfig's 2 labels"
printf '{"model_type": "clip_vision_model", "architectures": ["CLIPVisionModel"], "hidden_size": 1024,\n "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14}\n' > "$T/cv.json"
check_count "$T/cv.json" 303179776 "clip_vision_model (CLIPVisionModel of ViT-L/14)"
sed 's/"CLIPVisionModel"/"CLIPVisionModelWithProjection"/' "$T/cv.json" > "$T/cvp.json"
check_count "$T/cvp.json" $((303179776 + 512 * 1024)) "CLIPVisionModelWithProjection: CLIPVisionConfig's projection_dim 512"

# bad configs: exit 2, the field named, nothing on stdout
bad() { # NAME FILE SED-EXPR MESSAGE
    sed "$3" "$2" > "$T/$1.json"
    "$BIN" fit --hf-config "$T/$1.json" > "$T/$1.out" 2> "$T/$1.err"; rc=$?
    ok $([ $rc = 2 ] && [ ! -s "$T/$1.out" ] && echo 0 || echo 1) "$1: exit 2 (got $rc), nothing on stdout"
    ok $(contains "$(cat "$T/$1.err")" "$4") "$1: says '$4' $(head -c 200 "$T/$1.err")"
}
clip=$D/clip-vit-large-patch14.json
bad patch-divides "$vit" 's/"patch_size": 16/"patch_size": 15/' "image_size 224 does not divide by patch_size 15"
bad heads "$vit" 's/"num_attention_heads": 12/"num_attention_heads": 7/' "hidden_size 768 is not a multiple of num_attention_heads 7"
bad act "$vit" 's/"hidden_act": "gelu"/"hidden_act": "selu"/' "hidden_act 'selu' is not modelled"
bad qkv "$vit" 's/"qkv_bias": true/"qkv_bias": false/' "qkv_bias false is not modelled"
bad dropouts "$vit" 's/"hidden_dropout_prob": 0.0/"hidden_dropout_prob": 0.1/' "hidden_dropout_prob 0.1 and attention_probs_dropout_prob 0 differ"
bad arch "$vit" 's/"ViTForImageClassification"/"ViTForMaskedImageModeling"/' "architectures 'ViTForMaskedImageModeling' is not modelled"
bad layers "$vit" 's/"num_hidden_layers": 12/"num_hidden_layers": "12"/' "field 'num_hidden_layers' must be a whole number"
bad labels "$vit" 's/"id2label": {.*}/"id2label": []/' "field 'id2label' must be an object"
bad vision-patch "$clip" 's/"patch_size": 14/"patch_size": 0/' "vision_config: field 'patch_size' must be a whole number"
bad vision-object "$clip" 's/"vision_config": {/"vision_config": 3, "x": {/' "field 'vision_config' must be an object"

# the scenario key: the job's image_size must be the config's (positions are not interpolated)
cp "$vit" "$T/vit.json"
scen() { # JOB-MAPPING
    printf 'name: hf\ntitle: t\nsource: s\nmodel: { hf_config: vit.json, attn: eager }\njob: %s\nvariants:\n  before:\n    expect: { oom: false }\n' "$1" > "$T/s.yaml"
    "$BIN" run "$T/s.yaml" > "$T/s.out" 2> "$T/s.err"
}
scen '{ batch_size: 4, image_size: 224 }'; rc=$?
ok $rc "model: { hf_config: vit.json } runs at image_size 224 (exit $rc) $(head -c 200 "$T/s.err")"
ok $(contains "$(cat "$T/s.out")" "assumed: attention eager") "a model key beside it overrides it"
scen '{ batch_size: 4 }'; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "at the job's default image_size 512: exit 2 (got $rc)"
ok $(contains "$(cat "$T/s.err")" "image_size 512 makes 1024 patches") "and says why $(head -c 200 "$T/s.err")"
done_testing
