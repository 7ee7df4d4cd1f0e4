/* output.h: result files (--json, --csv, --snapshot, ...) written whole or not at all, and never
 * written over something they should not replace.
 *
 * Where the bytes go depends on what the path names when it is checked:
 *   "-"                  standard output (the process's stdout FILE, never closed).
 *   a character device   opened and written directly, never renamed over or created:
 *   or a FIFO            /dev/null stays /dev/null, a reader of a named pipe gets the data.
 *   a regular file, or   written to a temporary "FILE.tmp.PID.N" in the same directory, then renamed
 *   no file yet          over FILE on commit, so FILE is the old content or the new, never half of one.
 *                        An existing FILE keeps its permission bits (and, under root, its owner); a new
 *                        one gets 0666 less the umask. A FILE with several hard links is replaced under
 *                        this name only.
 *   a symbolic link      followed to its final target (a dangling link: the file it names), which is
 *                        written as above; the link itself stays a link.
 * Refused up front, with ERR_INPUT and "PATH: cannot write: REASON" (REASON is strerror's, preceded by
 * "directory DIR: " when the directory is the problem): a directory, a socket or block device, a path
 * whose directory is missing or not writable, an existing file the process may not write, a symlink
 * loop. Permission checks use the effective user, as open() would (root passes them; a read-only file
 * system still fails).
 *
 * Temporaries never outlive the process: they are removed on every error, by output_abort, at exit(),
 * and when SIGINT, SIGTERM, SIGHUP or SIGPIPE ends the process (a handler unlinks the live temporaries
 * and raises the signal again with its default action, so the exit status still names the signal).
 * The handlers are installed at the first output_open of a file, only for signals still at their
 * default action (an ignored signal stays ignored). Not thread-safe: one thread opens and commits.
 *
 * Write errors are reported with their reason at output_commit ("r.json: cannot write: No space left
 * on device"), including errors met by earlier buffered writes; ERR_INPUT, exit code 2.
 *
 * How a command uses it:
 *     struct output_request req[] = {{"--json", json_path}, {"--csv", csv_path}};   (NULL: not asked)
 *     if (output_check_all(req, 2, &e))      // before any work: unwritable path, or the same file twice
 *         return 2;
 *     ... the work ...
 *     struct output o;
 *     if (output_open(&o, json_path, &e))    // checks again, then creates the temporary
 *         return 2;
 *     fprintf(o.f, ...);                      // or json_dumpf(root, o.f, ...)
 *     if (output_commit(&o, &e))              // flush, fsync, close, rename; temporary removed on failure
 *         return 2;
 * and output_abort(&o) instead of output_commit when the work failed after the open. */
#ifndef OOMLAB_OUTPUT_H
#define OOMLAB_OUTPUT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/err.h"

enum output_kind {
    OUTPUT_STDOUT,   /* "-" */
    OUTPUT_DIRECT,   /* a character device or FIFO, written in place */
    OUTPUT_REPLACE,  /* a regular file (or none yet), replaced through a temporary */
};

/* What output_check found at a path. */
struct output_target {
    enum output_kind kind;
    char path[PATH_MAX];  /* as given: what messages name */
    char file[PATH_MAX];  /* what receives the bytes: symlinks followed, its directory made absolute */
    bool exists;          /* dev and ino are valid (for "-": whatever standard output is) */
    dev_t dev;
    ino_t ino;
};

/* Decides where the bytes for `path` would go and refuses, with the reason, what cannot be written
 * (see above). Creates and changes nothing. */
int output_check(const char *path, struct output_target *t, struct err *e);

/* Whether two checked outputs would land in the same file: both "-", the same file by device and inode
 * (so "-" and a path that standard output is redirected to are the same), or the same resolved path
 * for files not created yet. Character devices never collide (two outputs to /dev/null are fine). */
bool output_same(const struct output_target *a, const struct output_target *b);

/* One output a command was asked for: the option that named it (for messages) and its path. */
struct output_request {
    const char *option;  /* "--json" */
    const char *path;    /* NULL when the option was not given */
};

/* output_check on every requested path, then refuses two that name the same file
 * ("--json r.json and --csv ./r.json are the same file"). ERR_INPUT; nothing is created. */
int output_check_all(const struct output_request *req, size_t n, struct err *e);

struct output_sink;

/* An output being written. `f` is where the caller writes; the rest is the module's. */
struct output {
    FILE *f;
    struct output_sink *sink;   /* f's descriptor and first write error (not for "-") */
    struct output_target t;
    int slot;                   /* the temporary's place in the cleanup registry, or -1 */
    char tmp[PATH_MAX + 48];    /* the temporary, for OUTPUT_REPLACE */
};

/* Checks `path` (as output_check) and opens it for writing: the temporary of a file, the device or
 * FIFO itself (opening a FIFO waits for its reader), or stdout. On failure nothing is left behind and
 * o->f is NULL. */
int output_open(struct output *o, const char *path, struct err *e);
/* Flushes and closes the output and, for a file, fsyncs the temporary and renames it into place. Any
 * error, including one an earlier write met, fails with its reason and removes the temporary.
 * Afterwards o->f is NULL; for "-" stdout is flushed, not closed. */
int output_commit(struct output *o, struct err *e);
/* Drops an output: closes it and removes its temporary; a no-op on an output already committed or
 * aborted, one whose open failed, or a zero-initialised struct output. */
void output_abort(struct output *o);

#endif
