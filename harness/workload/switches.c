/* switches.c: what is done with every switch of a job at once, reading the fault and fix rows: the
 * parameters' defaults and bounds, the settings hooks, the allocator edits; and the lookups. */
#include "workload/switches.h"

#include <string.h>

#include "alloc/config.h"
#include "scenario/keytable.h"
#include "workload/spec.h"

enum side { FAULTS, FIXES, SIDES };

static const struct switch_info *rows_of(enum side k, int *n)
{
    return k == FAULTS ? fault_table(n) : fix_table(n);
}

static bool is_on(const struct job_spec *s, enum side k, int id)
{
    return ((k == FAULTS ? s->faults : s->fixes) >> id) & 1u;
}

void switches_init(struct job_spec *s)
{
    for (enum side k = FAULTS; k < SIDES; k++) {
        int n;
        const struct switch_info *rows = rows_of(k, &n);
        struct switch_params *slots = k == FAULTS ? s->fault_params : s->fix_params;
        for (int i = 0; i < n; i++) {
            memset(&slots[rows[i].id], 0, sizeof slots[rows[i].id]);
            if (rows[i].params && rows[i].params->init)
                rows[i].params->init(slots[rows[i].id].bytes);
        }
    }
}

int switches_check(const struct job_spec *s, struct err *e)
{
    for (enum side k = FAULTS; k < SIDES; k++) {
        int n;
        const struct switch_info *rows = rows_of(k, &n);
        const struct switch_params *slots = k == FAULTS ? s->fault_params : s->fix_params;
        for (int i = 0; i < n; i++)
            if (rows[i].params && is_on(s, k, rows[i].id) &&
                keytable_check_values(rows[i].params, slots[rows[i].id].bytes, rows[i].params->name, e))
                return -1;
    }
    return 0;
}

void switches_apply_settings(struct job_spec *s)
{
    for (enum side k = FAULTS; k < SIDES; k++) {
        int n;
        const struct switch_info *rows = rows_of(k, &n);
        for (int i = 0; i < n; i++)
            if (rows[i].settings && is_on(s, k, rows[i].id))
                rows[i].settings(s);
    }
}

int switches_edit_alloc(const struct job_spec *s, struct alloc_config *c, struct err *e)
{
    int n;
    const struct switch_info *fixes = fix_table(&n);
    for (int i = 0; i < n; i++)
        if (fixes[i].alloc_edit && spec_has_fix(s, (enum fix_id)fixes[i].id) && fixes[i].alloc_edit(c, s, e))
            return err_prefix(e, "fix %s: ", fixes[i].name);
    return 0;
}

void switch_alloc_setting(const struct switch_info *fix, char *buf, size_t len)
{
    struct job_spec s;
    struct alloc_config c;
    struct err e = {0};
    snprintf(buf, len, "%s", "");
    if (!fix->alloc_edit)
        return;
    job_spec_init(&s);
    alloc_config_default(&c);
    if (fix->alloc_edit(&c, &s, &e) == 0)
        snprintf(buf, len, "%s", c.text);
}

const struct switch_info *switch_find(const struct switch_info *table, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

int switch_enable(const struct switch_info *table, int n, const char *what, uint32_t *bits, const char *name,
                  struct err *e)
{
    const struct switch_info *row = switch_find(table, n, name);
    if (!row)
        return err_set(e, ERR_INPUT, "unknown %s '%s' (see `oomlab list`)", what, name);
    *bits |= 1u << row->id;
    return 0;
}
