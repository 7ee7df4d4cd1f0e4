/* hf_config.h: a model described by a Hugging Face config.json (model_type llama, mistral, qwen2). */
#ifndef OOMLAB_WORKLOAD_HF_CONFIG_H
#define OOMLAB_WORKLOAD_HF_CONFIG_H

#include <stdio.h>

#include "workload/spec.h"

/* Fills m from the config.json at path. Fields that change memory but are not modelled are an error
 * naming them, or (sliding_window) a warning written to warn. -1 and e (ERR_INPUT, naming the file
 * and the field) on a bad or unsupported config; m is then unspecified. */
int hf_config_load(const char *path, struct model_spec *m, FILE *warn, struct err *e);

#endif
