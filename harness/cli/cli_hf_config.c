/* cli_hf_config.c: the one-variant scenario `--hf-config FILE` stands for: the model of a Hugging Face
 * config.json trained with the job defaults (see job_spec_init) on the default device, its parameter
 * count printed first. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "cli/cli_common.h"
#include "device/device_kind.h"
#include "scenario/scenario.h"
#include "workload/hf_config.h"

int cli_hf_scenario(const char *path, struct scenario *sc, FILE *info, struct err *e)
{
    memset(sc, 0, sizeof *sc);
    struct job_spec job;
    job_spec_init(&job);
    if (hf_config_load(path, &job.model, stderr, e))
        return -1;
    if (model_image_size(&job.model)) /* a vision transformer: at the image size of its config */
        job.image_size = model_image_size(&job.model);
    int64_t n = model_param_count(&job.model, e);
    if (n < 0 || job_spec_validate(&job, e))
        return err_prefix(e, "%s: ", path), -1;
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
    snprintf(base, sizeof base, "%s", path);
    snprintf(sc->path, sizeof sc->path, "%s", path);
    snprintf(sc->name, sizeof sc->name, "%s", basename(base));
    snprintf(sc->title, sizeof sc->title, "the model of %s", path);
    snprintf(sc->device, sizeof sc->device, "%s", DEVICE_DEFAULT);
    fprintf(info, "%s: %s, %lld parameters (modelled: as the generator builds them from the config); "
                  "trained with the job defaults: %s, %s, %s %d\n",
            path, family_name(job.model.family), (long long)n, trainable_name(job.trainable),
            optimizer_name(job.optimizer), model_image_size(&job.model) ? "image_size" : "seq_len",
            model_image_size(&job.model) ? job.image_size : job.seq_len);
    return 0;
}
