/* scenario_errors_test.c: every file in tests/data/scenarios/bad must be rejected with exactly the
 * message its first line gives ("# error: LINE:COL: message", the file's path in front), as bad input,
 * leaving nothing to free. The empty file cannot carry a comment: its message is written here. */
#include <dirent.h>
#include <stdlib.h>

#include "scenario/scenario.h"
#include "tap.h"

#define BAD "tests/data/scenarios/bad"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The expected message: the path, then what follows "# error: " on the file's first line. */
static int expected_message(const char *path, char *want, size_t len)
{
    char line[1024] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (!got || strncmp(line, "# error: ", 9) != 0)
        return -1;
    line[strcspn(line, "\n")] = 0;
    snprintf(want, len, "%s:%s", path, line + 9);
    return 0;
}

static void check_rejected(const char *path, const char *want)
{
    struct scenario s;
    struct err e = {0};
    memset(&s, 0x5a, sizeof s);
    int rc = scenario_load(path, &s, &e);
    is_int(rc, -1, "%s is rejected", path);
    is_int(e.code, ERR_INPUT, "  as bad input");
    is_str(e.msg, want, "  with the exact message");
    ok(s.variants == NULL && s.nvariants == 0, "  and nothing to free");
}

int main(void)
{
    DIR *d = opendir(BAD);
    if (!d)
        tap_skip_all("no " BAD " directory (run from the repository root)");
    char *names[256];
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 256;)
        if (strstr(de->d_name, ".yaml"))
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof names[0], compare_names);
    ok(n >= 40, "%zu bad scenario files", n);

    for (size_t i = 0; i < n; i++) {
        char path[512], want[1600];
        snprintf(path, sizeof path, "%s/%s", BAD, names[i]);
        if (!strcmp(names[i], "empty.yaml"))
            snprintf(want, sizeof want, "%s:1:1: empty file: a scenario is a mapping of keys (name, model, job, ...)",
                     path);
        else if (!ok(expected_message(path, want, sizeof want) == 0, "%s starts with '# error: '", path))
            continue;
        check_rejected(path, want);
        free(names[i]);
    }
    return done_testing();
}
