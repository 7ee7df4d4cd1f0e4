/* atomic_file.c: see atomic_file.h. */
#include "util/atomic_file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int atomic_open(struct atomic_file *af, const char *path, struct err *e)
{
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%d", path, (int)getpid());
    if (!(af->f = fopen(af->tmp, "w")))
        return err_set(e, ERR_INPUT, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

int atomic_commit(struct atomic_file *af, struct err *e)
{
    int bad = ferror(af->f);
    if (fclose(af->f) || bad || rename(af->tmp, af->path)) {
        int saved = errno;
        unlink(af->tmp);
        return err_set(e, ERR_INPUT, "%s: cannot write: %s", af->path, strerror(saved));
    }
    return 0;
}

void atomic_abort(struct atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        unlink(af->tmp);
        af->f = NULL;
    }
}
