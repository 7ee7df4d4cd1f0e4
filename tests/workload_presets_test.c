/* workload_presets_test.c: every preset's parameter count, as the generator enumerates it, equals
 * the published count (workload-memory.md section 4); spec defaults and name tables round-trip. */
#include "tap.h"
#include "workload/spec.h"

static const struct {
    const char *name;
    long long params;
} expected[] = {
    {"flan-t5-base", 247577856LL},   {"flan-t5-large", 783150080LL},  {"flan-t5-xl", 2849757184LL},
    {"gpt2", 124439808LL},           {"gpt2-medium", 354823168LL},    {"gpt2-large", 774030080LL},
    {"gpt2-xl", 1557611200LL},       {"llama-2-7b", 6738415616LL},    {"llama-3-8b", 8030261248LL},
    {"bert-large-uncased", 335141888LL}, {"sd15-unet", 859520964LL}, {"sdxl-unet", 2567463684LL},
    {"sd-vae", 83653863LL},          {"clip-l-text", 123060480LL},
    /* the Hugging Face model cards' safetensors totals (tied heads counted once) */
    {"mistral-7b", 7241732096LL},    {"llama-3.1-8b", 8030261248LL},  {"qwen2.5-0.5b", 494032768LL},
    {"qwen2.5-1.5b", 1543714304LL},  {"qwen2.5-3b", 3085938688LL},    {"qwen2.5-7b", 7615616512LL},
    {"llama-2-13b", 13015864320LL},  {"gemma-2-9b", 9241705984LL},    {"phi-3-mini", 3821079552LL},
    {"roberta-base", 124645632LL},   {"roberta-large", 355359744LL},
};

int main(void)
{
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        is_int(preset_param_count(expected[i].name), expected[i].params, "%s has %lld parameters", expected[i].name,
               expected[i].params);
    /* tiny presets: counted by hand */
    is_int(preset_param_count("tiny-mlp"), 256 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10, "tiny-mlp");
    long long h = 256, L = 4, V = 8192, P = 512;
    is_int(preset_param_count("tiny-transformer"), V * h + P * h + L * (12 * h * h + 13 * h) + 2 * h, "tiny-transformer");
    ok(preset_param_count("tiny-cnn") > 0, "tiny-cnn has parameters");
    is_int(preset_param_count("no-such-model"), -1, "unknown preset gives -1");

    struct job_spec s;
    struct err e = {0};
    job_spec_init(&s);
    is_int(job_spec_validate(&s, &e), 0, "defaults validate");
    is_u64(s.cublas_workspace_bytes, 8519680ULL, "default cuBLAS workspace 8,519,680 B");
    is_str(family_name(FAMILY_T5), "t5", "family name");
    is_int(family_from_name("unet"), FAMILY_UNET, "family from name");
    is_int(optimizer_from_name("adamw_8bit"), OPT_ADAMW_8BIT, "optimizer from name");
    is_int(optimizer_from_name("lion"), -1, "unknown optimizer");
    snprintf(s.model.preset, sizeof s.model.preset, "gpt2");
    s.seq_len = 2048;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "1024"), "seq_len past learned positions is rejected: %s", e.msg);
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    presets_print(f);
    fclose(f);
    ok(strstr(buf, "flan-t5-xl") && strstr(buf, "2849757184"), "presets_print lists flan-t5-xl with its count");
    return done_testing();
}
