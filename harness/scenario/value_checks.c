/* value_checks.c: string keys whose values are checked where they are read: the device, allocator
 * settings (with PyTorch's own rules, from alloc/config.h) and model presets. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "device/profiles.h"
#include "scenario/scenario_file.h"
#include "scenario/suggest.h"
#include "util/size.h"

/* A scalar that fits `size` bytes with its NUL ("" for a key with no value when allow_empty). */
static const char *string_value(const struct key_ctx *c, const struct key *k, yaml_node_t *v, bool allow_empty,
                                struct err *e)
{
    char got[96];
    if (v->type != YAML_SCALAR_NODE || (!allow_empty && yaml_is_null(v))) {
        yaml_doc_error(c->doc, v, e, "%s must be a string, got %s", c->where, yaml_node_describe(v, got, sizeof got));
        return NULL;
    }
    const char *s = yaml_is_null(v) ? "" : yaml_scalar_text(v);
    if (strlen(s) >= k->size) {
        yaml_doc_error(c->doc, v, e, "%s is longer than %zu characters", c->where, k->size - 1);
        return NULL;
    }
    return s;
}

static const char *profile_name_at(const void *list, size_t i)
{
    return gpu_profile_at(i)->name;
}

static int check_sim_target(const struct key_ctx *c, yaml_node_t *v, const char *target, struct err *e)
{
    if (isdigit((unsigned char)*target) || *target == '.') {
        struct err why = {0};
        uint64_t bytes;
        if (size_parse(target, &bytes, &why))
            return yaml_doc_error(c->doc, v, e, "%s: %s", c->where, why.msg);
        if (bytes == 0)
            return yaml_doc_error(c->doc, v, e, "%s: a device of 0 bytes", c->where);
        return 0;
    }
    if (gpu_profile_find(target))
        return 0;
    const char *near = suggest_closest(target, gpu_profile_count(), profile_name_at, NULL);
    if (near)
        return yaml_doc_error(c->doc, v, e, "%s: unknown GPU profile '%s' (did you mean '%s'?)", c->where, target,
                              near);
    char known[512] = "";
    for (size_t i = 0; i < gpu_profile_count(); i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", gpu_profile_at(i)->name);
    return yaml_doc_error(c->doc, v, e, "%s: unknown GPU profile '%s' (known: %s)", c->where, target, known);
}

int parse_device(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    const char *s = string_value(c, k, v, false, e);
    if (!s)
        return -1;
    const char *colon = strchr(s, ':');
    size_t kind_len = colon ? (size_t)(colon - s) : strlen(s);
    const char *target = colon ? colon + 1 : NULL;
    int rc;
    if (target && !*target) {
        rc = yaml_doc_error(c->doc, v, e, "%s: nothing after the ':' in '%s'", c->where, s);
    } else if (kind_len == 3 && !strncmp(s, "sim", 3)) {
        rc = target ? check_sim_target(c, v, target, e) : 0;
    } else if (kind_len == 4 && !strncmp(s, "host", 4)) {
        struct err why = {0};
        struct capacity cap;
        rc = 0;
        if (target && capacity_parse(target, &cap, &why))
            rc = yaml_doc_error(c->doc, v, e, "%s: %s", c->where, why.msg);
    } else if (kind_len == 4 && !strncmp(s, "cuda", 4)) {
        rc = 0;
        if (target && strspn(target, "0123456789") != strlen(target))
            rc = yaml_doc_error(c->doc, v, e, "%s: '%s' is not a CUDA device number", c->where, target);
    } else {
        rc = yaml_doc_error(c->doc, v, e,
                            "%s must be sim, sim:PROFILE, sim:SIZE, host, host:SIZE, host:FRACTION, cuda or cuda:N, got '%s'",
                            c->where, s);
    }
    if (rc)
        return -1;
    memcpy(field, s, strlen(s) + 1);
    return 0;
}

/* Into a struct alloc_config: PyTorch's defaults with the string's settings. */
int parse_alloc_conf(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    struct key text = *k;
    text.size = sizeof(((struct alloc_config *)0)->text);
    const char *s = string_value(c, &text, v, true, e);
    if (!s)
        return -1;
    struct alloc_config cfg;
    struct err why = {0};
    alloc_config_default(&cfg);
    if (alloc_config_parse(&cfg, s, &why))
        return yaml_doc_error(c->doc, v, e, "%s: %s", c->where, why.msg);
    memcpy(field, &cfg, sizeof cfg);
    return 0;
}

/* The preset names, read from presets_print (one preset a line, its name first). */
static size_t preset_names(char names[][SPEC_NAME_MAX], size_t max)
{
    char *text = NULL;
    size_t len = 0, n = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    presets_print(f);
    fclose(f);
    for (char *line = text; line && *line && n < max; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t w = strcspn(line, " \n");
        if (w > 0 && w < SPEC_NAME_MAX) {
            memcpy(names[n], line, w);
            names[n++][w] = 0;
        }
    }
    free(text);
    return n;
}

static const char *name_row_at(const void *list, size_t i)
{
    return ((const char (*)[SPEC_NAME_MAX])list)[i];
}

int parse_preset(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    const char *s = string_value(c, k, v, false, e);
    if (!s)
        return -1;
    if (preset_param_count(s) < 0) {
        char names[64][SPEC_NAME_MAX];
        const char *near = suggest_closest(s, preset_names(names, 64), name_row_at, names);
        if (near)
            return yaml_doc_error(c->doc, v, e, "%s: unknown preset '%s' (did you mean '%s'?)", c->where, s, near);
        return yaml_doc_error(c->doc, v, e, "%s: unknown preset '%s' (`oomlab list` shows them)", c->where, s);
    }
    memcpy(field, s, strlen(s) + 1);
    return 0;
}
