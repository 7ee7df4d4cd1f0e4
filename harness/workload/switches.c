/* switches.c: lookup and parameter parsing shared by the fault and fix tables. */
#include "workload/switches.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const struct switch_info *switch_find(const struct switch_info *table, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

int switch_param_set(const struct switch_info *sw, void *base, const char *param, const char *value, struct err *e)
{
    for (int i = 0; i < sw->nparams; i++) {
        const struct switch_param *p = &sw->params[i];
        if (strcmp(p->name, param) != 0)
            continue;
        char *end = NULL;
        char *field = (char *)base + p->offset;
        errno = 0;
        switch (p->type) {
        case SWITCH_INT: {
            long v = strtol(value, &end, 10);
            if (errno || !*value || *end || v < 0 || v > 1000000000L)
                return err_set(e, ERR_INPUT, "%s.%s: expected a non-negative integer, got '%s'", sw->name, param, value);
            *(int *)field = (int)v;
            return 0;
        }
        case SWITCH_U64: {
            unsigned long long v = strtoull(value, &end, 10);
            if (errno || !*value || *end)
                return err_set(e, ERR_INPUT, "%s.%s: expected an unsigned integer, got '%s'", sw->name, param, value);
            *(uint64_t *)field = v;
            return 0;
        }
        case SWITCH_DOUBLE: {
            double v = strtod(value, &end);
            if (errno || !*value || *end || v < 0)
                return err_set(e, ERR_INPUT, "%s.%s: expected a non-negative number, got '%s'", sw->name, param, value);
            *(double *)field = v;
            return 0;
        }
        case SWITCH_DTYPE: {
            int d = dtype_from_name(value);
            if (d != DT_F32 && d != DT_BF16 && d != DT_F16)
                return err_set(e, ERR_INPUT, "%s.%s: expected fp32, bf16 or fp16, got '%s'", sw->name, param, value);
            *(enum dtype *)field = (enum dtype)d;
            return 0;
        }
        }
    }
    return err_set(e, ERR_INPUT, "%s has no parameter '%s'", sw->name, param);
}
