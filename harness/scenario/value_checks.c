/* value_checks.c: string keys whose values are checked where they are read: the device, allocator
 * settings (with PyTorch's own rules, from alloc/config.h) and model presets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/config.h"
#include "device/device_kind.h"
#include "scenario/scenario_file.h"
#include "scenario/suggest.h"

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

/* The one device-spec parser's verdict, at the value's file:line:col. */
int parse_device(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    const char *s = string_value(c, k, v, false, e);
    if (!s)
        return -1;
    struct device_spec spec;
    struct err why = {0};
    if (device_spec_parse(s, &spec, &why))
        return yaml_doc_error(c->doc, v, e, "%s: %s", c->where, why.msg);
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
    if (!preset_known(s)) {
        char names[64][SPEC_NAME_MAX];
        const char *near = suggest_closest(s, preset_names(names, 64), name_row_at, names);
        if (near)
            return yaml_doc_error(c->doc, v, e, "%s: unknown preset '%s' (did you mean '%s'?)", c->where, s, near);
        return yaml_doc_error(c->doc, v, e, "%s: unknown preset '%s' (`oomlab list` shows them)", c->where, s);
    }
    memcpy(field, s, strlen(s) + 1);
    return 0;
}
