/* overrides.c: `--set KEY=VALUE` on a scenario (oomlab sweep). The value is written into the parsed YAML
 * document at the key's dotted path (job.batch_size, model.layers, alloc_conf) before the key tables read
 * it, so it is checked exactly as the same value written in the file would be. */
#include <string.h>

#include "scenario/scenario_file.h"

/* The index of the value of `key` in mapping node `map` (0: absent), and of the pair through *pair. */
static int mapping_value(struct yaml_doc *d, int map, const char *key, yaml_node_pair_t **pair)
{
    yaml_node_t *m = yaml_doc_node(d, map);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = yaml_scalar_text(yaml_doc_node(d, p->key));
        if (k && !strcmp(k, key)) {
            *pair = p;
            return p->value;
        }
    }
    return 0;
}

/* Node `n` placed where node `like` is in the file, so a message about it points at a line of the file:
 * the value it replaces, or the mapping it joins. */
static void place(struct yaml_doc *d, int n, int like)
{
    yaml_node_t *at = yaml_doc_node(d, like), *v = yaml_doc_node(d, n);
    v->start_mark = at->start_mark, v->end_mark = at->end_mark;
}

/* Adds `key: value` (value a node index) to mapping `map`. Node pointers are stale afterwards: libyaml
 * may move its node array, so everything here works with indexes. */
static int add_pair(struct yaml_doc *d, int map, const char *key, int value)
{
    int k = yaml_document_add_scalar(&d->doc, NULL, (yaml_char_t *)key, (int)strlen(key), YAML_PLAIN_SCALAR_STYLE);
    if (!k)
        return -1;
    place(d, k, map);
    place(d, value, map);
    return yaml_document_append_mapping_pair(&d->doc, map, k, value) ? 0 : -1;
}

static int apply_one(struct yaml_doc *d, const struct scenario_override *o, struct err *e)
{
    char path[256];
    if (snprintf(path, sizeof path, "%s", o->key) >= (int)sizeof path)
        return err_set(e, ERR_INPUT, "--set %s: the key is longer than %zu characters", o->key, sizeof path - 1);
    int map = 1; /* the root: yaml_doc_load checked that it is a mapping */
    if (yaml_doc_root(d)->type != YAML_MAPPING_NODE)
        return err_set(e, ERR_INPUT, "%s: the scenario is not a mapping", d->path);
    char *part = path;
    for (char *dot; (dot = strchr(part, '.')); part = dot + 1) {
        *dot = '\0';
        if (!*part)
            return err_set(e, ERR_INPUT, "--set %s: an empty part in the key", o->key);
        yaml_node_pair_t *pair;
        int sub = mapping_value(d, map, part, &pair);
        if (sub && yaml_doc_node(d, sub)->type != YAML_MAPPING_NODE)
            return err_set(e, ERR_INPUT, "--set %s: %s is not a mapping in %s", o->key, part, d->path);
        if (!sub) {
            if (!(sub = yaml_document_add_mapping(&d->doc, NULL, YAML_BLOCK_MAPPING_STYLE)) ||
                add_pair(d, map, part, sub))
                return err_set(e, ERR_INTERNAL, "--set %s: out of host memory", o->key);
        }
        map = sub;
    }
    if (!*part)
        return err_set(e, ERR_INPUT, "--set %s: an empty part in the key", o->key);
    int value = yaml_document_add_scalar(&d->doc, NULL, (yaml_char_t *)o->value, (int)strlen(o->value),
                                         YAML_PLAIN_SCALAR_STYLE);
    if (!value)
        return err_set(e, ERR_INTERNAL, "--set %s: out of host memory", o->key);
    yaml_node_pair_t *pair;
    int old = mapping_value(d, map, part, &pair);
    if (old) {
        place(d, value, old);
        pair->value = value;
    } else if (add_pair(d, map, part, value))
        return err_set(e, ERR_INTERNAL, "--set %s: out of host memory", o->key);
    return 0;
}

int scenario_overrides_apply(struct yaml_doc *d, const struct scenario_override *ov, size_t n, struct err *e)
{
    for (size_t i = 0; i < n; i++)
        if (apply_one(d, &ov[i], e))
            return -1;
    return 0;
}
