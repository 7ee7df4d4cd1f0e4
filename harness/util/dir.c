/* dir.c: making an output directory (see dir.h). */
#include "util/dir.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int dir_make(const char *dir, struct err *e)
{
    struct stat st;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    return err_set(e, ERR_INPUT, "%s: cannot make the directory: %s", dir,
                   errno == EEXIST ? "a file of that name exists" : strerror(errno));
}
