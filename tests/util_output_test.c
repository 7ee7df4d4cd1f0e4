/* util_output_test.c: util/output.h: where a path's bytes go (stdout, a device or FIFO in place, a
 * file through a temporary, a symlink's target), what is refused up front and with which reason, when
 * two outputs are the same file, that a commit keeps the replaced file's mode, and that no temporary
 * survives an abort, a failed commit, a write error, exit() or SIGINT. */
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/output.h"

static char dir[PATH_MAX];

static const char *at(const char *name)
{
    static char buf[4][PATH_MAX + 64];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

/* Files in the test directory whose name holds ".tmp." */
static int temporaries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static const char *read_file(const char *path)
{
    static char buf[256];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
        fclose(f);
    }
    return buf;
}

static void test_kinds(void)
{
    struct output_target t;
    struct err e = {0};
    ok(output_check("-", &t, &e) == 0 && t.kind == OUTPUT_STDOUT, "'-' is standard output");
    ok(output_check("/dev/null", &t, &e) == 0 && t.kind == OUTPUT_DIRECT, "/dev/null is written in place");
    mkfifo(at("fifo"), 0600);
    ok(output_check(at("fifo"), &t, &e) == 0 && t.kind == OUTPUT_DIRECT, "a FIFO is written in place");
    ok(output_check(at("new.json"), &t, &e) == 0 && t.kind == OUTPUT_REPLACE && !t.exists,
       "a path that does not exist is a file to create");
    char real[PATH_MAX + 64];
    snprintf(real, sizeof real, "%s", at("new.json"));
    is_str(t.file, real, "its file is absolute");
    write_file(at("target.json"), "old");
    symlink("target.json", at("link.json"));
    ok(output_check(at("link.json"), &t, &e) == 0 && t.kind == OUTPUT_REPLACE && t.exists, "a symlink to a file");
    is_str(t.file, at("target.json"), "its bytes go to the link's target");
    symlink("gone/x.json", at("dangling.json"));
    e = (struct err){0};
    ok(output_check(at("dangling.json"), &t, &e) == -1, "a link into a missing directory is refused");
    is_int(temporaries(), 0, "checking creates nothing");
}

static void expect_refusal(const char *path, const char *want, const char *what)
{
    struct output_target t;
    struct err e = {0};
    char full[2 * PATH_MAX];
    snprintf(full, sizeof full, want, path, dir);
    ok(output_check(path, &t, &e) == -1 && e.code == ERR_INPUT, "%s is refused (ERR_INPUT)", what);
    is_str(e.msg, full, "%s: the message names the path and the reason", what);
}

static void test_refusals(void)
{
    expect_refusal(dir, "%s: cannot write: Is a directory", "a directory");
    expect_refusal(at("missing/r.json"), "%s: cannot write: directory %s/missing: No such file or directory",
                   "a path in a missing directory");
    write_file(at("plain"), "x");
    expect_refusal(at("plain/r.json"), "%s: cannot write: Not a directory", "a path under a file");
    expect_refusal(at("subdir/"), "%s: cannot write: directory %s/subdir: No such file or directory",
                   "a path ending in / whose directory is missing");
    struct err e = {0};
    struct output_target t;
    ok(output_check("", &t, &e) == -1 && strstr(e.msg, "empty"), "an empty path is refused (%s)", e.msg);
    if (geteuid() == 0) {
        printf("ok %d # SKIP a read-only file is writable by root (running as root)\n", ++tap_count);
        printf("ok %d # SKIP a read-only directory is writable by root (running as root)\n", ++tap_count);
    } else {
        write_file(at("ro.csv"), "keep");
        chmod(at("ro.csv"), 0444);
        expect_refusal(at("ro.csv"), "%s: cannot write: Permission denied", "a read-only file");
        mkdir(at("rodir"), 0555);
        expect_refusal(at("rodir/r.json"), "%s: cannot write: directory %s/rodir: Permission denied",
                       "a file in a read-only directory");
    }
}

static bool same(const char *a, const char *b)
{
    struct output_target x, y;
    struct err e = {0};
    return output_check(a, &x, &e) == 0 && output_check(b, &y, &e) == 0 && output_same(&x, &y);
}

static void test_same_file(void)
{
    ok(same("-", "-"), "'-' twice is the same output");
    char rel[PATH_MAX + 64];
    snprintf(rel, sizeof rel, "%s/./sub/../x.json", dir);
    mkdir(at("sub"), 0755);
    ok(same(at("x.json"), rel), "one new file by two spellings is the same file");
    ok(same(at("target.json"), at("link.json")), "a file and a symlink to it are the same file");
    link(at("target.json"), at("hard.json"));
    ok(same(at("target.json"), at("hard.json")), "a file and a hard link to it are the same file");
    ok(!same(at("x.json"), at("y.json")), "two new files are not");
    ok(!same(at("target.json"), at("x.json")), "an existing file and a new one are not");
    ok(!same("/dev/null", "/dev/null"), "two outputs to /dev/null do not collide");

    struct output_request req[] = {{"--json", at("x.json")}, {"--csv", NULL}, {"--snapshot", rel}};
    struct err e = {0};
    ok(output_check_all(req, 3, &e) == -1 && e.code == ERR_INPUT, "--json x --snapshot ./x is refused");
    ok(strstr(e.msg, "--json") && strstr(e.msg, "--snapshot") && strstr(e.msg, "are the same file"),
       "naming both options (%s)", e.msg);
    struct output_request fine[] = {{"--json", at("x.json")}, {"--csv", at("y.csv")}, {"--tap", NULL}};
    e = (struct err){0};
    is_int(output_check_all(fine, 3, &e), 0, "two different files pass");
    struct output_request bad[] = {{"--json", at("x.json")}, {"--csv", dir}};
    e = (struct err){0};
    ok(output_check_all(bad, 2, &e) == -1 && !strncmp(e.msg, "--csv ", 6), "a bad path is named by its option (%s)",
       e.msg);
}

static void test_commit_and_abort(void)
{
    struct output o;
    struct err e = {0};
    write_file(at("kept.json"), "old");
    chmod(at("kept.json"), 0640);
    ok(output_open(&o, at("kept.json"), &e) == 0, "open an existing file");
    is_int(temporaries(), 1, "a temporary exists while writing");
    fputs("new", o.f);
    is_str(read_file(at("kept.json")), "old", "the file is the old one until the commit");
    ok(output_commit(&o, &e) == 0 && o.f == NULL, "commit");
    is_str(read_file(at("kept.json")), "new", "and then the new one");
    struct stat st;
    stat(at("kept.json"), &st);
    is_int(st.st_mode & 0777, 0640, "the replaced file keeps its mode");
    is_int(temporaries(), 0, "no temporary after a commit");

    ok(output_open(&o, at("kept.json"), &e) == 0, "open it again");
    fputs("half", o.f);
    output_abort(&o);
    output_abort(&o);
    is_str(read_file(at("kept.json")), "new", "an abort leaves the file as it was");
    is_int(temporaries(), 0, "and removes the temporary (twice is harmless)");

    ok(output_open(&o, at("link.json"), &e) == 0, "open through a symlink");
    fputs("via link", o.f);
    ok(output_commit(&o, &e) == 0, "commit through the symlink");
    ok(lstat(at("link.json"), &st) == 0 && S_ISLNK(st.st_mode), "the link is still a link");
    is_str(read_file(at("target.json")), "via link", "its target has the content");

    /* the file's place is taken by a directory before the commit: the rename fails */
    ok(output_open(&o, at("taken.json"), &e) == 0, "open a new file");
    fputs("x", o.f);
    mkdir(at("taken.json"), 0755);
    ok(output_commit(&o, &e) == -1 && strstr(e.msg, "taken.json: cannot write: Is a directory"),
       "a failed rename is reported with its reason (%s)", e.msg);
    is_int(temporaries(), 0, "and its temporary is removed");
}

static void test_write_errors(void)
{
    /* root writes to a private node of /dev/full's device, so a regression cannot replace /dev/full */
    const char *full = mknod(at("full"), S_IFCHR | 0666, makedev(1, 7)) == 0 ? at("full") : "/dev/full";
    struct output o;
    struct err e = {0};
    ok(output_open(&o, full, &e) == 0, "open %s (/dev/full)", full);
    for (int i = 0; i < 10000; i++) /* 100 KB: buffered writes fail long before the commit */
        fputs("0123456789", o.f);
    ok(output_commit(&o, &e) == -1, "commit fails");
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s: cannot write: No space left on device", full);
    is_str(e.msg, want, "with the reason");
    struct stat st;
    ok(stat(full, &st) == 0 && S_ISCHR(st.st_mode), "%s is still a character device", full);

    struct output s;
    e = (struct err){0};
    ok(output_open(&s, "-", &e) == 0 && s.f == stdout, "'-' writes to stdout");
    ok(output_commit(&s, &e) == 0, "and its commit flushes it");
}

/* A child opens an output, writes and is then ended by `how`; the temporary must be gone. */
static void test_child_ends(const char *how)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct output o;
        struct err e = {0};
        if (output_open(&o, at("child.csv"), &e))
            _exit(3);
        fputs("partial", o.f);
        fflush(o.f);
        if (!strcmp(how, "exit"))
            exit(0);
        raise(!strcmp(how, "SIGINT") ? SIGINT : SIGTERM);
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!strcmp(how, "exit"))
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child exited normally", how);
    else
        ok(WIFSIGNALED(status) && WTERMSIG(status) == (!strcmp(how, "SIGINT") ? SIGINT : SIGTERM),
           "%s: the child died of the signal (status 0x%x)", how, status);
    is_int(temporaries(), 0, "%s: no temporary is left", how);
    ok(access(at("child.csv"), F_OK) != 0, "%s: and no result file", how);
}

int main(void)
{
    signal(SIGINT, SIG_DFL); /* as in a foreground process, even when started in the background */
    snprintf(dir, sizeof dir, "/tmp/oomlab-output-test.XXXXXX");
    if (!mkdtemp(dir))
        tap_skip_all("cannot make a temporary directory");
    test_kinds();
    test_refusals();
    test_same_file();
    test_commit_and_abort();
    test_write_errors();
    test_child_ends("SIGINT");
    test_child_ends("SIGTERM");
    test_child_ends("exit");
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
