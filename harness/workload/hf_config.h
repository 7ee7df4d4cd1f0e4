/* hf_config.h: a model described by a Hugging Face config.json (model_type llama, mistral, qwen2; vit, clip,
 * clip_vision_model in hf_config_vision.c). */
#ifndef OOMLAB_WORKLOAD_HF_CONFIG_H
#define OOMLAB_WORKLOAD_HF_CONFIG_H

#include <stdio.h>

#include "workload/spec.h"

/* Fills m from the config.json at path. Fields that change memory but are not modelled are an error
 * naming them, or (sliding_window) a warning written to warn. -1 and e (ERR_INPUT, naming the file
 * and the field) on a bad or unsupported config; m is then unspecified. */
int hf_config_load(const char *path, struct model_spec *m, FILE *warn, struct err *e);

/* hf_config_vision.c: whether model_type is a vision transformer's, and its reader (root: the json_t
 * object of the file at path); the same contract as hf_config_load. */
bool hf_config_vision_type(const char *type);
int hf_config_vision_fill(void *root, const char *path, const char *type, struct model_spec *m, FILE *warn,
                          struct err *e);

#endif
