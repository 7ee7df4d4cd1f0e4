/* hf_config.h: a model described by a Hugging Face config.json: one table row per model_type (its name,
 * the preset whose architecture it starts from, its field reader), and the field helpers the readers
 * share, so a reader in another file (hf_config_vision.c) is one more row. */
#ifndef OOMLAB_WORKLOAD_HF_CONFIG_H
#define OOMLAB_WORKLOAD_HF_CONFIG_H

#include <stdio.h>

#include "workload/spec.h"

/* What a config says beyond the model's dimensions. */
struct hf_config_info {
    bool has_dtype;         /* the config names its weights' dtype (torch_dtype, or transformers 5's dtype) */
    enum dtype dtype;
    char notes[1024];       /* the assumptions made reading it, "; "-separated ("" = none) */
};

/* Fills m (and info, when not NULL) from the config.json at path. A field that changes memory but is
 * not modelled is an error naming it, or a warning written to warn (NULL: not written). -1 and e
 * (ERR_INPUT, naming the file and the field) on a bad or unsupported config; m is then unspecified. */
int hf_config_read(const char *path, struct model_spec *m, struct hf_config_info *info, FILE *warn, struct err *e);
/* "llama, mistral, ...": the supported model types. */
void hf_config_types_text(char *buf, size_t len);

/* ---- for model-type readers ---- */

/* One config being read. */
struct hf_reader {
    void *root;                 /* the json_t object */
    const char *path;
    const char *type;           /* its model_type */
    struct model_spec *m;       /* the base preset's architecture, to be filled */
    struct hf_config_info *info;
    FILE *warn;
};

/* A whole number field from 1: *out unchanged when absent (or null) and not required. */
int hf_int(struct hf_reader *r, const char *key, bool required, int *out, struct err *e);
int hf_bool(struct hf_reader *r, const char *key, bool *out, struct err *e);        /* unchanged when absent */
int hf_str(struct hf_reader *r, const char *key, const char **out, struct err *e);  /* unchanged when absent */
int hf_number(struct hf_reader *r, const char *key, double *out, struct err *e);    /* null: unchanged */
bool hf_has(struct hf_reader *r, const char *key);                                  /* present and not null */
/* An activation named as transformers' ACT2FN names it (activations.py), read from key. */
int hf_act(struct hf_reader *r, const char *key, enum act_kind *out, struct err *e);
/* architectures[0], *out unchanged when absent. */
int hf_architecture(struct hf_reader *r, const char **out, struct err *e);
/* A classifier's classes: num_labels, else the entries of id2label, else PretrainedConfig's 2; 1
 * (regression) is an error. */
int hf_num_labels(struct hf_reader *r, int *out, struct err *e);
/* A warning about a field that changes memory but is not modelled (to r->warn). */
void hf_warn(struct hf_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An assumption made reading the config (appended to info->notes). */
void hf_note(struct hf_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Readers in other files, rows of the table: hf_config_vision.c (vit, clip, clip_vision_model). */
int hf_read_vit(struct hf_reader *r, struct err *e);
int hf_read_clip(struct hf_reader *r, struct err *e);
int hf_read_clip_vision(struct hf_reader *r, struct err *e);

#endif
