/* switch_list.c: the `faults:` and `fixes:` lists, whose items are a name or a one-key mapping of a
 * name to its parameters, read through the workload's fault and fix tables (a switch's parameters by
 * the key table of its row); and `keep_faults:`. */
#include <stddef.h>
#include <string.h>

#include "scenario/scenario_file.h"
#include "scenario/suggest.h"

/* The fault or fix side of the workload's switch tables, and where a job keeps that side's parameters. */
struct switch_kind {
    const char *what; /* "fault", "fix" */
    const struct switch_info *(*table)(int *count);
    const struct switch_info *(*find)(const char *name);
    int (*enable)(struct job_spec *spec, const char *name, struct err *e);
    size_t slots;     /* offset of its struct switch_params array in struct job_spec */
};

static const struct switch_kind fault_kind = {"fault", fault_table, fault_find, fault_enable,
                                              offsetof(struct job_spec, fault_params)};
static const struct switch_kind fix_kind = {"fix", fix_table, fix_find, fix_enable,
                                            offsetof(struct job_spec, fix_params)};

static const char *switch_name_at(const void *list, size_t i)
{
    return ((const struct switch_info *)list)[i].name;
}

static const char *param_name_at(const void *list, size_t i)
{
    return ((const struct key *)list)[i].name;
}

static bool has_param(const struct switch_info *sw, const char *name)
{
    for (size_t i = 0; sw->params && i < sw->params->nkeys; i++)
        if (!strcmp(sw->params->keys[i].name, name))
            return true;
    return false;
}

static int unknown_switch(const struct key_ctx *c, const struct switch_kind *kind, yaml_node_t *at, const char *name,
                          struct err *e)
{
    int n;
    const struct switch_info *t = kind->table(&n);
    const char *near = suggest_closest(name, (size_t)n, switch_name_at, t);
    if (near)
        return yaml_doc_error(c->doc, at, e, "unknown %s '%s' in %s (did you mean '%s'?)", kind->what, name, c->where,
                              near);
    return yaml_doc_error(c->doc, at, e, "unknown %s '%s' in %s (`oomlab list` shows them)", kind->what, name,
                          c->where);
}

static int unknown_param(const struct key_ctx *c, const struct switch_kind *kind, const struct switch_info *sw,
                         yaml_node_t *at, const char *name, struct err *e)
{
    size_t n = sw->params ? sw->params->nkeys : 0;
    const char *near = n ? suggest_closest(name, n, param_name_at, sw->params->keys) : NULL;
    if (near)
        return yaml_doc_error(c->doc, at, e, "unknown parameter '%s' of %s '%s' in %s (did you mean '%s'?)", name,
                              kind->what, sw->name, c->where, near);
    if (n == 0)
        return yaml_doc_error(c->doc, at, e, "unknown parameter '%s' of %s '%s' in %s (it takes no parameters)", name,
                              kind->what, sw->name, c->where);
    char known[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", sw->params->keys[i].name);
    return yaml_doc_error(c->doc, at, e, "unknown parameter '%s' of %s '%s' in %s (its parameters: %s)", name, kind->what,
                          sw->name, c->where, known);
}

/* The parameters of one switch, read by its row's key table into the job's slot for it. */
static int set_params(const struct key_ctx *c, const struct switch_kind *kind, const struct switch_info *sw,
                      yaml_node_t *params, struct job_spec *job, struct err *e)
{
    char path[300];
    snprintf(path, sizeof path, "%s.%s", c->where, sw->name);
    if (yaml_is_null(params))
        return 0;
    if (keytable_expect_mapping(c, params, path, e))
        return -1;
    for (yaml_node_pair_t *p = params->data.mapping.pairs.start; p < params->data.mapping.pairs.top; p++) {
        yaml_node_t *key = yaml_doc_node(c->doc, p->key);
        const char *name = yaml_scalar_text(key);
        if (name && !has_param(sw, name))
            return unknown_param(c, kind, sw, key, name, e);
    }
    if (!sw->params)
        return 0; /* an empty mapping */
    struct switch_params *slots = (struct switch_params *)((char *)job + kind->slots);
    struct key_ctx sub = {c->doc, c->root, path};
    return keytable_apply(sw->params, &sub, params, slots[sw->id].bytes, e);
}

/* One item: "name" or "name: {param: value, ...}". */
static int read_item(const struct key_ctx *c, const struct switch_kind *kind, yaml_node_t *item, size_t index,
                     struct job_spec *job, uint32_t *seen, struct err *e)
{
    char got[96];
    yaml_node_t *name_node = item, *params = NULL;
    if (item->type == YAML_MAPPING_NODE) {
        size_t npairs = (size_t)(item->data.mapping.pairs.top - item->data.mapping.pairs.start);
        if (npairs != 1)
            return yaml_doc_error(c->doc, item, e, "%s[%zu] must name one %s, got %zu keys (put each on its own line)",
                                  c->where, index, kind->what, npairs);
        name_node = yaml_doc_node(c->doc, item->data.mapping.pairs.start->key);
        params = yaml_doc_node(c->doc, item->data.mapping.pairs.start->value);
    }
    if (name_node->type != YAML_SCALAR_NODE || yaml_is_null(name_node))
        return yaml_doc_error(c->doc, name_node, e, "%s[%zu] must be a %s name or 'name: {parameter: value}', got %s",
                              c->where, index, kind->what, yaml_node_describe(name_node, got, sizeof got));
    const char *name = yaml_scalar_text(name_node);
    const struct switch_info *sw = kind->find(name);
    if (!sw)
        return unknown_switch(c, kind, name_node, name, e);
    if (*seen & (1u << sw->id))
        return yaml_doc_error(c->doc, name_node, e, "%s '%s' is listed twice in %s", kind->what, name, c->where);
    *seen |= 1u << sw->id;
    struct err why = {0};
    if (kind->enable(job, name, &why))
        return yaml_doc_error(c->doc, name_node, e, "%s: %s", c->where, why.msg);
    return params ? set_params(c, kind, sw, params, job, e) : 0;
}

static int parse_switch_list(const struct key_ctx *c, const struct switch_kind *kind, yaml_node_t *v,
                             struct job_spec *job, struct err *e)
{
    char got[96];
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a list of %s names, got %s", c->where, kind->what,
                              yaml_node_describe(v, got, sizeof got));
    uint32_t seen = 0;
    size_t index = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, index++)
        if (read_item(c, kind, yaml_doc_node(c->doc, *it), index, job, &seen, e))
            return -1;
    return 0;
}

int parse_fault_list(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    return parse_switch_list(c, &fault_kind, v, field, e);
}

int parse_fix_list(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    return parse_switch_list(c, &fix_kind, v, field, e);
}

/* Runs after the whole top level is read (variants are built last), so the base faults are known. */
int parse_keep_faults(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    const struct scenario_file *f = c->root;
    int n;
    const struct switch_info *t = fault_table(&n);
    const char *names[FAULT_COUNT];
    int idx[FAULT_COUNT];
    size_t count;
    if (n > FAULT_COUNT)
        n = FAULT_COUNT;
    for (int i = 0; i < n; i++)
        names[i] = t[i].name;
    if (keytable_read_names(c, v, c->where, "fault", names, (size_t)n, idx, FAULT_COUNT, &count, e))
        return -1;
    uint32_t keep = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t bit = 1u << t[idx[i]].id;
        if (!(f->base.faults & bit))
            return yaml_doc_error(c->doc, yaml_doc_node(c->doc, v->data.sequence.items.start[i]), e,
                                  "%s: fault '%s' is not switched on in faults", c->where, t[idx[i]].name);
        keep |= bit;
    }
    memcpy(field, &keep, sizeof keep);
    return 0;
}
