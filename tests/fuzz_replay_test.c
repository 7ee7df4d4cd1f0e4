/* fuzz_replay_test.c: every committed fuzz input (fuzz/seeds/NAME and the regression inputs in
 * tests/data/fuzz/NAME, which reproduce crashes and issue-10 rows) through the fuzz targets' own
 * entry points, in the ordinary build: a target aborts on a failed invariant and `make test
 * SANITIZE=1` catches memory errors, so each of these is a regression test without clang. */
#include <dirent.h>
#include <sys/stat.h>

#include "tap.h"

int fuzz_pickle(const uint8_t *data, size_t size);
int fuzz_snapshot(const uint8_t *data, size_t size);
int fuzz_scenario(const uint8_t *data, size_t size);
int fuzz_alloc_conf(const uint8_t *data, size_t size);
int fuzz_size(const uint8_t *data, size_t size);
int fuzz_alloc_ops(const uint8_t *data, size_t size);
int fuzz_stress_profile(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    int (*run)(const uint8_t *, size_t);
} targets[] = {
    {"pickle", fuzz_pickle}, {"snapshot", fuzz_snapshot}, {"scenario", fuzz_scenario},
    {"alloc_conf", fuzz_alloc_conf}, {"size", fuzz_size}, {"alloc_ops", fuzz_alloc_ops},
    {"stress_profile", fuzz_stress_profile},
};

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            unsigned char *grown = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!grown)
                break;
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (!got)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Runs target t on every regular file in dir; returns how many. */
static int replay_dir(size_t t, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), count = 0;
    closedir(d);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        struct stat st;
        size_t len = 0;
        unsigned char *data;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (data = slurp(path, &len))) {
            diag("%s: %s", targets[t].name, path); /* names the input if the target dies on it */
            is_int(targets[t].run(data, len), 0, "%s survives %s (%zu bytes)", targets[t].name, path, len);
            free(data);
            count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(void)
{
    int total = 0;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        char dir[256];
        snprintf(dir, sizeof dir, "fuzz/seeds/%s", targets[t].name);
        total += replay_dir(t, dir);
        snprintf(dir, sizeof dir, "tests/data/fuzz/%s", targets[t].name);
        total += replay_dir(t, dir);
    }
    ok(total >= 30, "%d committed inputs replayed (run from the repository's top directory)", total);
    return done_testing();
}
