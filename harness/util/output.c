/* output.c: see output.h. Files are written through a stdio FILE over our own file descriptor
 * (fopencookie), so the first errno a buffered write meets is kept and reported at commit. */
#define _GNU_SOURCE /* fopencookie */
#include "util/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/temp_registry.h"

#define SYMLINK_HOPS 40 /* as the kernel's ELOOP limit */

static int refuse(struct err *e, const char *path, int why)
{
    return err_set(e, ERR_INPUT, "%s: cannot write: %s", path, strerror(why));
}

static int refuse_dir(struct err *e, const char *path, const char *dir, int why)
{
    return err_set(e, ERR_INPUT, "%s: cannot write: directory %s: %s", path, dir, strerror(why));
}

/* The directory part of `path` ("." when it has none) into dir. */
static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

static int copy_path(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n >= PATH_MAX)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* The file a path that does not exist names: itself, or where its chain of symlinks ends. */
static int follow_dangling(const char *path, char *out, struct err *e)
{
    char cur[PATH_MAX], link[PATH_MAX];
    if (copy_path(cur, path))
        return refuse(e, path, ENAMETOOLONG);
    for (int hop = 0; hop < SYMLINK_HOPS; hop++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return copy_path(out, cur) ? refuse(e, path, ENAMETOOLONG) : 0;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return refuse(e, path, errno);
        link[n] = '\0';
        if (link[0] == '/') {
            memcpy(cur, link, (size_t)n + 1);
        } else {
            char dir[PATH_MAX];
            dir_of(cur, dir, sizeof dir);
            if ((size_t)snprintf(cur, sizeof cur, "%s/%s", dir, link) >= sizeof cur)
                return refuse(e, path, ENAMETOOLONG);
        }
    }
    return refuse(e, path, ELOOP);
}

/* t->file becomes the absolute form of `file` (whose last component may not exist yet), after checking
 * that its directory exists and may be written. */
static int check_directory(struct output_target *t, const char *file, struct err *e)
{
    char dir[PATH_MAX], real[PATH_MAX];
    dir_of(file, dir, sizeof dir);
    struct stat st;
    if (!realpath(dir, real) || stat(real, &st) != 0)
        return refuse_dir(e, t->path, dir, errno);
    if (!S_ISDIR(st.st_mode))
        return refuse_dir(e, t->path, dir, ENOTDIR);
    if (faccessat(AT_FDCWD, real, W_OK | X_OK, AT_EACCESS) != 0)
        return refuse_dir(e, t->path, dir, errno);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return refuse(e, t->path, EISDIR);
    if ((size_t)snprintf(t->file, sizeof t->file, "%s/%s", strcmp(real, "/") ? real : "", base) >= sizeof t->file)
        return refuse(e, t->path, ENAMETOOLONG);
    return 0;
}

int output_check(const char *path, struct output_target *t, struct err *e)
{
    memset(t, 0, sizeof *t);
    if (!path || !*path)
        return err_set(e, ERR_INPUT, "an output path is empty (use - for standard output)");
    if (copy_path(t->path, path))
        return refuse(e, path, ENAMETOOLONG);
    struct stat st;
    if (!strcmp(path, "-")) {
        t->kind = OUTPUT_STDOUT;
        if (fstat(STDOUT_FILENO, &st) == 0) {
            t->exists = true;
            t->dev = st.st_dev;
            t->ino = st.st_ino;
        }
        return 0;
    }
    if (stat(path, &st) != 0) {
        if (errno != ENOENT)
            return refuse(e, path, errno);
        char file[PATH_MAX];
        if (follow_dangling(path, file, e) || check_directory(t, file, e))
            return -1;
        t->kind = OUTPUT_REPLACE;
        return 0;
    }
    if (S_ISDIR(st.st_mode))
        return refuse(e, path, EISDIR);
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
        return err_set(e, ERR_INPUT, "%s: cannot write: not a regular file, character device or FIFO", path);
    t->exists = true;
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0)
        return refuse(e, path, errno);
    if (!S_ISREG(st.st_mode)) {
        t->kind = OUTPUT_DIRECT;
        snprintf(t->file, sizeof t->file, "%s", path);
        return 0;
    }
    char real[PATH_MAX];
    if (!realpath(path, real))
        return refuse(e, path, errno);
    t->kind = OUTPUT_REPLACE;
    return check_directory(t, real, e);
}

/* A character device is a stream, not a file whose content two writers could mix up. */
static bool is_chardev(const struct output_target *t)
{
    struct stat st;
    return t->kind == OUTPUT_DIRECT && stat(t->file, &st) == 0 && S_ISCHR(st.st_mode);
}

bool output_same(const struct output_target *a, const struct output_target *b)
{
    if (a->kind == OUTPUT_STDOUT && b->kind == OUTPUT_STDOUT)
        return true;
    if (is_chardev(a) || is_chardev(b))
        return false;
    if (a->exists && b->exists)
        return a->dev == b->dev && a->ino == b->ino;
    return !a->exists && !b->exists && !strcmp(a->file, b->file);
}

int output_check_all(const struct output_request *req, size_t n, struct err *e)
{
    struct output_target *t = calloc(n ? n : 1, sizeof *t);
    if (!t)
        return err_set(e, ERR_INTERNAL, "out of host memory checking output paths");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (req[i].path && output_check(req[i].path, &t[i], e))
            rc = err_prefix(e, "%s ", req[i].option);
    for (size_t i = 0; i < n && rc == 0; i++)
        for (size_t k = i + 1; k < n && rc == 0; k++)
            if (req[i].path && req[k].path && output_same(&t[i], &t[k]))
                rc = err_set(e, ERR_INPUT, "%s %s and %s %s are the same file: give each its own", req[i].option,
                             req[i].path, req[k].option, req[k].path);
    free(t);
    return rc;
}

/* ---- writing through our own descriptor ---- */

struct output_sink {
    int fd;
    int error; /* the first errno a write met */
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    struct output_sink *s = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(s->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!s->error)
                s->error = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    return (ssize_t)done; /* short: stdio marks the FILE as failed */
}

/* Closes the descriptor and frees the sink; a failed close leaves its errno for fclose's caller. */
static int sink_close(void *cookie)
{
    struct output_sink *s = cookie;
    int rc = close(s->fd);
    int why = errno;
    free(s);
    errno = why;
    return rc;
}

/* A FILE over fd whose sink records the first write error; fclose closes fd and frees the sink. */
static FILE *open_sink(int fd, struct output_sink **out)
{
    struct output_sink *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    *s = (struct output_sink){.fd = fd, .error = 0};
    FILE *f = fopencookie(s, "w", (cookie_io_functions_t){.write = sink_write, .close = sink_close});
    if (!f) {
        free(s);
        return NULL;
    }
    *out = s;
    return f;
}

/* Creates the temporary beside t->file, with the mode (and, under root, the owner) of the file it
 * replaces. Returns its descriptor, or -1 with e set. */
static int create_temporary(struct output *o, struct err *e)
{
    static unsigned counter;
    struct stat st;
    bool replaces = o->t.exists && stat(o->t.file, &st) == 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld.%u", o->t.file, (long)getpid(), counter++) >=
            sizeof o->tmp)
            return refuse(e, o->t.path, ENAMETOOLONG);
        if ((o->slot = temp_register(o->tmp)) < 0)
            return err_set(e, ERR_INTERNAL, "%s: cannot write: more than %d result files open at once", o->t.path,
                           TEMP_REGISTRY_SLOTS);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            int why = errno;
            temp_unregister(o->slot);
            o->slot = -1;
            if (why == EEXIST)
                continue;
            return refuse(e, o->t.path, why);
        }
        if (replaces && (fchmod(fd, st.st_mode & 07777) != 0 ||
                         (geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) != 0))) {
            int why = errno;
            close(fd);
            unlink(o->tmp);
            temp_unregister(o->slot);
            o->slot = -1;
            return refuse(e, o->t.path, why);
        }
        return fd;
    }
    return refuse(e, o->t.path, EEXIST);
}

/* The device or FIFO itself; it must still be one once opened. */
static int open_direct(struct output *o, struct err *e)
{
    int fd = open(o->t.file, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return refuse(e, o->t.path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0 || (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))) {
        close(fd);
        return err_set(e, ERR_INPUT, "%s: cannot write: it changed while being opened", o->t.path);
    }
    return fd;
}

int output_open(struct output *o, const char *path, struct err *e)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    if (output_check(path, &o->t, e))
        return -1;
    if (o->t.kind == OUTPUT_STDOUT) {
        o->f = stdout;
        return 0;
    }
    int fd = o->t.kind == OUTPUT_DIRECT ? open_direct(o, e) : create_temporary(o, e);
    if (fd < 0)
        return -1;
    if (!(o->f = open_sink(fd, &o->sink))) {
        close(fd);
        output_abort(o);
        return err_set(e, ERR_INTERNAL, "%s: out of host memory opening it", path);
    }
    return 0;
}

/* Flushes, fsyncs a temporary, closes: 0, or the errno of the first failure (earlier writes included). */
static int finish_file(struct output *o)
{
    int why = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        why = o->sink->error ? o->sink->error : errno ? errno : EIO;
    if (!why && o->t.kind == OUTPUT_REPLACE && fsync(o->sink->fd) != 0)
        why = errno;
    errno = 0;
    if (fclose(o->f) != 0 && !why)
        why = errno ? errno : EIO;
    o->f = NULL;
    o->sink = NULL;
    return why;
}

int output_commit(struct output *o, struct err *e)
{
    if (!o->f)
        return err_set(e, ERR_INTERNAL, "%s: output committed twice or never opened", o->t.path);
    if (o->t.kind == OUTPUT_STDOUT) {
        errno = 0;
        int failed = fflush(stdout) != 0 || ferror(stdout);
        o->f = NULL;
        return failed ? err_set(e, ERR_INPUT, "standard output: cannot write: %s", strerror(errno ? errno : EIO))
                      : 0;
    }
    int why = finish_file(o);
    if (!why && o->t.kind == OUTPUT_REPLACE && rename(o->tmp, o->t.file) != 0)
        why = errno;
    if (o->t.kind == OUTPUT_REPLACE) {
        if (why)
            unlink(o->tmp);
        temp_unregister(o->slot);
        o->slot = -1;
    }
    return why ? refuse(e, o->t.path, why) : 0;
}

void output_abort(struct output *o)
{
    if (o->f && o->t.kind != OUTPUT_STDOUT)
        fclose(o->f);
    o->f = NULL;
    o->sink = NULL;
    if (o->slot >= 0 && o->tmp[0]) {
        unlink(o->tmp);
        temp_unregister(o->slot);
        o->slot = -1;
    }
}
