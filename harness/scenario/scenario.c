/* scenario.c: loading scenario files (one, or every *.yaml of a directory in name order). */
#include "scenario/scenario.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scenario/scenario_file.h"

int scenario_load(const char *path, struct scenario *out, struct err *e)
{
    return scenario_load_with(path, NULL, 0, out, e);
}

int scenario_load_with(const char *path, const struct scenario_override *ov, size_t nov, struct scenario *out,
                       struct err *e)
{
    memset(out, 0, sizeof *out);
    struct yaml_doc doc;
    if (yaml_doc_load(&doc, path, e))
        return -1;
    if (scenario_overrides_apply(&doc, ov, nov, e)) {
        yaml_doc_free(&doc);
        return -1;
    }
    struct scenario_file *f = malloc(sizeof *f);
    if (!f) {
        yaml_doc_free(&doc);
        return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    }
    scenario_top_table.init(f);
    snprintf(f->head.path, sizeof f->head.path, "%s", doc.path);
    struct key_ctx c = {&doc, f, ""};
    int rc = keytable_apply(&scenario_top_table, &c, yaml_doc_root(&doc), f, e);
    yaml_doc_free(&doc);
    if (rc && nov) { /* the message names the file's position and the key; say what was set */
        char set[512];
        size_t at = 0;
        for (size_t i = 0; i < nov && at < sizeof set; i++)
            at += (size_t)snprintf(set + at, sizeof set - at, "%s%s=%s", i ? " " : "", ov[i].key, ov[i].value);
        err_prefix(e, "with --set %s: ", set);
    }
    if (rc)
        free(f->head.variants);
    else
        *out = f->head;
    free(f);
    return rc;
}

void scenario_free(struct scenario *s)
{
    free(s->variants);
    s->variants = NULL;
    s->nvariants = 0;
}

void scenario_free_all(struct scenario *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        scenario_free(&s[i]);
    free(s);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_yaml_name(const char *name)
{
    size_t len = strlen(name);
    return name[0] != '.' && len > 5 && !strcmp(name + len - 5, ".yaml");
}

int scenario_list_yaml_files(const char *dir, char ***names, size_t *n, struct err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return err_set(e, ERR_INPUT, "%s: cannot open directory: %s", dir, strerror(errno));
    size_t cap = 0;
    *names = NULL;
    *n = 0;
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!is_yaml_name(de->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*names, cap * sizeof *grown);
            if (!grown) {
                rc = err_set(e, ERR_INTERNAL, "%s: out of memory listing files", dir);
                break;
            }
            *names = grown;
        }
        if (!((*names)[*n] = strdup(de->d_name))) {
            rc = err_set(e, ERR_INTERNAL, "%s: out of memory listing files", dir);
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (rc == 0 && *n == 0)
        rc = err_set(e, ERR_INPUT, "%s: no *.yaml scenario files in this directory", dir);
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            free((*names)[i]);
        free(*names);
        return -1;
    }
    qsort(*names, *n, sizeof **names, compare_names);
    return 0;
}

static int load_dir(const char *dir, struct scenario **out, size_t *n, struct err *e)
{
    char **names = NULL;
    size_t count = 0;
    if (scenario_list_yaml_files(dir, &names, &count, e))
        return -1;
    struct scenario *all = calloc(count, sizeof *all);
    size_t loaded = 0;
    int rc = all ? 0 : err_set(e, ERR_INTERNAL, "%s: out of memory", dir);
    size_t dir_len = strlen(dir);
    const char *sep = dir_len && dir[dir_len - 1] == '/' ? "" : "/";
    for (size_t i = 0; i < count && rc == 0; i++) {
        char path[1024];
        if (snprintf(path, sizeof path, "%s%s%s", dir, sep, names[i]) >= (int)sizeof path)
            rc = err_set(e, ERR_INPUT, "%s%s%s: path too long", dir, sep, names[i]);
        else if ((rc = scenario_load(path, &all[loaded], e)) == 0)
            loaded++;
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    if (rc) {
        scenario_free_all(all, loaded);
        return -1;
    }
    *out = all;
    *n = loaded;
    return 0;
}

int scenario_load_dir_or_file(const char *path, struct scenario **out, size_t *n, struct err *e)
{
    *out = NULL;
    *n = 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return load_dir(path, out, n, e);
    struct scenario *one = calloc(1, sizeof *one);
    if (!one)
        return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    if (scenario_load(path, one, e)) {
        free(one);
        return -1;
    }
    *out = one;
    *n = 1;
    return 0;
}
