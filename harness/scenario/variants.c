/* variants.c: after the top level is read, the base job is completed and checked, and each variant
 * is built from it: a copy of the base job, the variant's keys (kept faults, fixes, job changes,
 * expectation), the workload's own validation, and its allocator config: the scenario's (or its own)
 * parsed alloc_conf, edited by its allocator fixes' rows. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "scenario/scenario_file.h"

/* Names become file names of results: lower-case letters, digits, '-', '_', '.', starting with a letter
 * or digit. */
static bool is_slug(const char *s)
{
    if (!isalnum((unsigned char)*s))
        return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || strchr("-_.", *s)))
            return false;
    return true;
}

static int check_name(const struct key_ctx *c, yaml_node_t *top, const char *name, struct err *e)
{
    yaml_node_t *node = yaml_mapping_get(c->doc, top, "name", NULL);
    if (!is_slug(name))
        return yaml_doc_error(c->doc, node, e,
                              "name must be lower-case letters, digits, '-', '_' or '.', starting with a letter or "
                              "digit, got '%s'",
                              name);
    return 0;
}

/* The workload's own check of a job (cross-key rules such as heads dividing hidden); its message names
 * the fields, the position is the mapping the job came from. */
static int validate_job(const struct key_ctx *c, yaml_node_t *at, const char *what, struct job_spec *job,
                        struct err *e)
{
    struct err why = {0};
    if (job_spec_validate(job, &why))
        return yaml_doc_error(c->doc, at, e, "%s is not valid: %s", what, why.msg);
    return 0;
}

/* The base job is checked before any variant, where its error belongs: the model, or the job. */
static int validate_base(const struct key_ctx *c, yaml_node_t *top, const struct job_spec *base, struct err *e)
{
    struct job_spec checked = *base;
    struct err why = {0};
    if (job_spec_validate(&checked, &why) == 0)
        return 0;
    yaml_node_t *model = yaml_mapping_get(c->doc, top, "model", NULL);
    yaml_node_t *job = yaml_mapping_get(c->doc, top, "job", NULL);
    bool about_model = !strncmp(why.msg, "model", 5) || !job;
    return yaml_doc_error(c->doc, about_model ? model : job, e, "%s is not valid: %s", about_model ? "model" : "job",
                          why.msg);
}

static bool is_variant_name(const char *s)
{
    return !strcmp(s, "before") || !strcmp(s, "after") || (!strncmp(s, "after-", 6) && s[6] && is_slug(s + 6));
}

static int build_one(const struct key_ctx *c, const struct scenario_file *f, yaml_node_t *key, yaml_node_t *value,
                     struct variant *v, struct err *e)
{
    const char *name = yaml_scalar_text(key);
    char where[128], got[96];
    if (!name)
        return yaml_doc_error(c->doc, key, e, "a variant name must be a string, got %s",
                              yaml_node_describe(key, got, sizeof got));
    if (!is_variant_name(name) || strlen(name) >= sizeof v->name)
        return yaml_doc_error(c->doc, key, e,
                              "variant name '%s' must be 'before', 'after' or 'after-' followed by a name of "
                              "lower-case letters, digits, '-', '_' or '.'",
                              name);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->job = f->base;
    v->alloc = f->head.alloc;
    snprintf(where, sizeof where, "variants.%s", name);
    struct key_ctx sub = {c->doc, c->root, where};
    if (keytable_expect_mapping(c, value, where, e) || keytable_apply(&scenario_variant_table, &sub, value, v, e))
        return -1;
    if (validate_job(c, value, where, &v->job, e))
        return -1;
    struct err why = {0};
    if (switches_edit_alloc(&v->job, &v->alloc, &why))
        return yaml_doc_error(c->doc, value, e, "%s: %s", where, why.msg);
    return 0;
}

/* A model.hf_config's torch_dtype is the job's load_dtype and param_dtype unless the job sets either. */
static void hf_dtype(const struct key_ctx *c, yaml_node_t *top, struct scenario_file *f)
{
    yaml_node_t *job = yaml_mapping_get(c->doc, top, "job", NULL);
    if (!f->model.hf.has_dtype || (job && (yaml_mapping_get(c->doc, job, "load_dtype", NULL) ||
                                           yaml_mapping_get(c->doc, job, "param_dtype", NULL))))
        return;
    f->base.load_dtype = f->base.param_dtype = f->model.hf.dtype;
}

int build_variants(const struct key_ctx *c, yaml_node_t *top, void *obj, struct err *e)
{
    struct scenario_file *f = obj;
    if (check_name(c, top, f->head.name, e))
        return -1;
    f->base.model = f->model.spec;
    hf_dtype(c, top, f);
    memcpy(f->base.name, f->head.name, strlen(f->head.name) + 1);
    if (validate_base(c, top, &f->base, e))
        return -1;

    yaml_node_t *vs = f->variants_node;
    size_t n = (size_t)(vs->data.mapping.pairs.top - vs->data.mapping.pairs.start);
    if (n > SCENARIO_MAX_VARIANTS)
        return yaml_doc_error(c->doc, vs, e, "variants: %zu variants, at most %d", n, SCENARIO_MAX_VARIANTS);
    f->head.variants = calloc(n, sizeof *f->head.variants);
    if (!f->head.variants)
        return err_set(e, ERR_INTERNAL, "%s: out of memory for %zu variants", c->doc->path, n);
    for (yaml_node_pair_t *p = vs->data.mapping.pairs.start; p < vs->data.mapping.pairs.top; p++) {
        yaml_node_t *key = yaml_doc_node(c->doc, p->key);
        yaml_node_t *earlier = key->type == YAML_SCALAR_NODE
                                   ? yaml_mapping_earlier(c->doc, vs, p, yaml_scalar_text(key)) : NULL;
        if (earlier)
            return yaml_doc_error(c->doc, key, e, "duplicate variant '%s' (first at line %zu)", yaml_scalar_text(key),
                                  earlier->start_mark.line + 1);
        if (build_one(c, f, key, yaml_doc_node(c->doc, p->value), &f->head.variants[f->head.nvariants], e))
            return -1;
        f->head.nvariants++;
    }
    return 0;
}
