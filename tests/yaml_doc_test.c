/* yaml_doc_test.c: the YAML loader's limits: nesting deeper than YAML_DOC_MAX_DEPTH (64) is refused
 * at its file:line:col before libyaml builds the document (20,000 levels in 40 KB took 10 s; now at
 * once), 64 levels load; an escaped NUL in a double-quoted string is refused at its position instead
 * of cutting the string short; a file above YAML_DOC_MAX_BYTES is refused before it is read. */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "scenario/yaml_doc.h"
#include "tap.h"

static char dir[] = "/tmp/oomlab-yaml-test.XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

/* "key: " then `levels` nested flow lists. */
static char *nested(size_t levels)
{
    char *s = malloc(2 * levels + 16);
    size_t n = (size_t)sprintf(s, "key: ");
    memset(s + n, '[', levels), n += levels;
    memset(s + n, ']', levels), n += levels;
    strcpy(s + n, "\n");
    return s;
}

/* Loads `path`: the error message ("" when it loads) and the seconds it took. */
static const char *load(const char *path, double *seconds)
{
    static struct err e;
    struct yaml_doc d;
    struct timespec t0, t1;
    e = (struct err){0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = yaml_doc_load(&d, path, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (seconds)
        *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc == 0)
        yaml_doc_free(&d);
    return e.msg;
}

static void test_depth(void)
{
    char *text = nested(63); /* 63 lists in the root mapping: 64 levels */
    const char *path = write_file("d64.yaml", text);
    is_str(load(path, NULL), "", "64 levels of nesting load");
    free(text);

    text = nested(64);
    path = write_file("d65.yaml", text);
    char want[512];
    snprintf(want, sizeof want, "%s:1:69: nested deeper than 64 levels, the most a scenario file may", path);
    is_str(load(path, NULL), want, "65 levels are refused at the 65th");
    free(text);

    text = nested(20000);
    path = write_file("deep.yaml", text);
    double took;
    snprintf(want, sizeof want, "%s:1:69: nested deeper than 64 levels", path);
    ok(!strncmp(load(path, &took), want, strlen(want)), "20,000 levels (40 KB) are refused at the 65th");
    ok(took < 0.5, "at once (%.3f s; libyaml took 10 s to build the document)", took);
    free(text);

    path = write_file("block.yaml", "a:\n  b:\n    - c: 1\n      d: [1, {e: 2}]\n");
    is_str(load(path, NULL), "", "ordinary block nesting loads");
}

static void test_nul(void)
{
    const char *path = write_file("nul.yaml", "name: ok\ntitle: \"ab\\0cd\"\n");
    char want[512];
    snprintf(want, sizeof want, "%s:2:8: a string holds a NUL character (\\0); scenario strings cannot contain one",
             path);
    is_str(load(path, NULL), want, "an escaped \\0 is refused at its string");
    path = write_file("nulx.yaml", "name: ok\n\"k\\x00\": 1\n");
    snprintf(want, sizeof want, "%s:2:1: a string holds a NUL character (\\0); scenario strings cannot contain one",
             path);
    is_str(load(path, NULL), want, "so is \\x00 in a key");
    path = write_file("zero.yaml", "name: \"a\\u0030b\"\ntitle: '\\0'\n");
    is_str(load(path, NULL), "", "an escaped digit zero and a single-quoted backslash-zero are ordinary text");
}

static void test_size(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/big.yaml", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd < 0 || ftruncate(fd, YAML_DOC_MAX_BYTES + 1) != 0) { /* sparse */
        printf("ok %d # SKIP cannot make a sparse file\n", ++tap_count);
        return;
    }
    close(fd);
    char want[512];
    snprintf(want, sizeof want, "%s: too large for a scenario (4194305 bytes, limit 4194304)", path);
    is_str(load(path, NULL), want, "a file of 4 MiB + 1 byte is refused");
}

int main(void)
{
    if (!mkdtemp(dir))
        tap_skip_all("cannot make a temporary directory");
    test_depth();
    test_nul();
    test_size();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
