/* cli_hf_config.c: the one-variant scenario `--hf-config FILE` stands for: the model of a Hugging Face
 * config.json on the default device, with the job defaults (see job_spec_init) or the job options given
 * beside it (--batch-size, --seq-len, --precision, --optimizer, --trainable); its parameter count, job
 * and assumptions printed first. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "cli/cli_common.h"
#include "device/device_kind.h"
#include "scenario/scenario.h"
#include "workload/hf_config.h"

bool cli_hf_option(int c, const char *arg, struct cli_hf_args *a)
{
    switch (c) {
    case CLI_OPT_HF_CONFIG: a->config = arg; return true;
    case CLI_OPT_BATCH: a->batch = arg; return true;
    case CLI_OPT_SEQ: a->seq_len = arg; return true;
    case CLI_OPT_PRECISION: a->precision = arg; return true;
    case CLI_OPT_OPTIMIZER: a->optimizer = arg; return true;
    case CLI_OPT_TRAINABLE: a->trainable = arg; return true;
    default: return false;
    }
}

int cli_hf_only(const struct cli_hf_args *a, struct err *e)
{
    const char *given = a->batch ? "--batch-size" : a->seq_len ? "--seq-len" : a->precision ? "--precision"
                      : a->optimizer ? "--optimizer" : a->trainable ? "--trainable" : NULL;
    if (given && !a->config)
        return err_set(e, ERR_INPUT, "%s goes with --hf-config (a scenario sets its job in its file)", given);
    return 0;
}

/* --precision: the job keys each name stands for (pure: weights loaded and trained in that dtype;
 * mixed: fp32 weights, the forward under autocast, fp16 with GradScaler's loss scaling). */
static const struct {
    const char *name;
    enum dtype weights;
    bool autocast;
    enum dtype compute;
} precisions[] = {
    {"fp32", DT_F32, false, DT_F32},       {"bf16", DT_BF16, false, DT_BF16},
    {"fp16", DT_F16, false, DT_F16},       {"bf16-mixed", DT_F32, true, DT_BF16},
    {"fp16-mixed", DT_F32, true, DT_F16},
};

static int set_precision(struct job_spec *job, const char *name, struct err *e)
{
    for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++)
        if (!strcmp(name, precisions[i].name)) {
            job->load_dtype = job->param_dtype = precisions[i].weights;
            job->autocast = precisions[i].autocast;
            job->autocast_dtype = precisions[i].compute;
            job->loss_scaling = precisions[i].autocast && precisions[i].compute == DT_F16;
            return 0;
        }
    return err_set(e, ERR_INPUT, "--precision '%s': one of fp32, bf16, fp16, bf16-mixed, fp16-mixed", name);
}

static int set_count(const char *name, const char *arg, int *out, struct err *e)
{
    uint64_t v;
    if (cli_count_option(name, arg, &v, e))
        return -1;
    if (v > (1u << 30))
        return err_set(e, ERR_INPUT, "%s %s: at most 2^30", name, arg);
    *out = (int)v;
    return 0;
}

static int set_name(const char *option, const char *arg, int (*from_name)(const char *), const char *(*name)(int),
                    int count, int *out, struct err *e)
{
    int v = from_name(arg);
    if (v >= 0) {
        *out = v;
        return 0;
    }
    char list[256];
    size_t used = 0;
    for (int i = 0; i < count && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", name(i));
    return err_set(e, ERR_INPUT, "%s '%s': one of %s", option, arg, list);
}

static const char *optimizer_at(int i) { return optimizer_name((enum optimizer_kind)i); }
static const char *trainable_at(int i) { return trainable_name((enum trainable_kind)i); }

/* The job options over the defaults; without --precision the config's torch_dtype, pure: transformers 5
 * loads in the config's dtype by default (dtype="auto", huggingface/transformers PR #42805) and a Trainer
 * without bf16/fp16 trains the weights as loaded. */
static int job_options(const struct cli_hf_args *a, const struct hf_config_info *info, struct job_spec *job,
                       struct err *e)
{
    int opt = job->optimizer, tr = job->trainable;
    if ((a->batch && set_count("--batch-size", a->batch, &job->batch, e)) ||
        (a->seq_len && set_count("--seq-len", a->seq_len, &job->seq_len, e)) ||
        (a->optimizer &&
         set_name("--optimizer", a->optimizer, optimizer_from_name, optimizer_at, OPT_COUNT, &opt, e)) ||
        (a->trainable && set_name("--trainable", a->trainable, trainable_from_name, trainable_at, TRAIN_COUNT, &tr, e)))
        return -1;
    job->optimizer = (enum optimizer_kind)opt;
    job->trainable = (enum trainable_kind)tr;
    if (a->precision)
        return set_precision(job, a->precision, e);
    if (info->has_dtype)
        job->load_dtype = job->param_dtype = info->dtype;
    return 0;
}

static void print_job(const struct cli_hf_args *a, const struct job_spec *job, const struct hf_config_info *info,
                      int64_t n, FILE *out)
{
    bool image = model_image_size(&job->model) > 0; /* a vision transformer: its shape is the image's */
    fprintf(out, "%s: %s, %lld parameters (modelled: as the generator builds them from the config); job: batch %d, "
                 "%s %d, %s, %s, %s\n",
            a->config, family_name(job->model.family), (long long)n, job->batch, image ? "image_size" : "seq_len",
            image ? job->image_size : job->seq_len,
            a->precision ? a->precision : dtype_name(job->param_dtype), optimizer_name(job->optimizer),
            trainable_name(job->trainable));
    fprintf(out, "%s: assumed: ", a->config);
    if (a->precision)
        fprintf(out, "precision %s from --precision", a->precision);
    else if (info->has_dtype)
        fprintf(out, "weights loaded and trained in torch_dtype %s (transformers 5's from_pretrained default, "
                     "dtype=\"auto\"; --precision changes it)", dtype_name(info->dtype));
    else
        fprintf(out, "fp32 weights (the config names no torch_dtype)");
    fprintf(out, "%s%s\n", info->notes[0] ? "; " : "", info->notes);
}

int cli_hf_scenario(const struct cli_hf_args *a, struct scenario *sc, FILE *info, struct err *e)
{
    memset(sc, 0, sizeof *sc);
    struct job_spec job;
    job_spec_init(&job);
    struct hf_config_info hf;
    if (hf_config_read(a->config, &job.model, &hf, stderr, e) || job_options(a, &hf, &job, e))
        return -1;
    if (model_image_size(&job.model)) /* a vision transformer: at the image size of its config */
        job.image_size = model_image_size(&job.model);
    int64_t n = model_param_count(&job.model, e);
    if (n < 0 || job_spec_validate(&job, e))
        return err_prefix(e, "%s: ", a->config), -1;
    sc->variants = calloc(1, sizeof *sc->variants);
    if (!sc->variants)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    sc->nvariants = 1;
    struct variant *v = &sc->variants[0];
    snprintf(v->name, sizeof v->name, "hf-config");
    v->job = job;
    snprintf(v->job.name, sizeof v->job.name, "hf-config");
    alloc_config_default(&v->alloc);
    alloc_config_default(&sc->alloc);
    char base[512];
    snprintf(base, sizeof base, "%s", a->config);
    snprintf(sc->path, sizeof sc->path, "%s", a->config);
    snprintf(sc->name, sizeof sc->name, "%s", basename(base));
    snprintf(sc->title, sizeof sc->title, "the model of %s", a->config);
    snprintf(sc->device, sizeof sc->device, "%s", DEVICE_DEFAULT);
    print_job(a, &job, &hf, n, info);
    return 0;
}
