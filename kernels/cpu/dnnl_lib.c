/* dnnl_lib.c: oneDNN opened on the first convolution (dnnl_lib.h). */
#define DNNL_LIB_FILL
#include "cpu/dnnl_lib.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/lazy_lib.h"

struct dnnl_lib dnnl_lib;

#define DNNL_LIB_SYMBOL(f) {#f, (void **)&dnnl_lib.f},
/* dlsym on the library's handle also searches what it depends on, so libgomp's omp_set_num_threads is found */
static const struct lazy_symbol syms[] = {DNNL_LIB_FUNCTIONS(DNNL_LIB_SYMBOL) DNNL_LIB_SYMBOL(omp_set_num_threads)};
static struct lazy_lib lib = LAZY_LIB_INIT("libdnnl.so.2", "oneDNN for convolutions", syms);

/* libgomp reads OMP_WAIT_POLICY once, when it is loaded (with oneDNN). Its default spins a thread that
 * finished its share of a parallel region for up to 300,000 rounds before it sleeps: a core taken from the
 * next kernel on oomlab's own threads or OpenBLAS's after every convolution (half the CPU time of a host
 * run of scenarios/host/chunked_decode.yaml, measured). Passive waiting sleeps at once. A policy set by
 * the user is kept. Set before the first dlopen, while no other thread of the process reads the environment. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Also takes $OOMLAB_DNNL, when set, as the library to open. */
static void env_set(void)
{
    const char *so = getenv("OOMLAB_DNNL");
    if (so && *so)
        lib.soname = so;
    setenv("OMP_WAIT_POLICY", "passive", 0);
}

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_status_t engine_status;

static void engine_create(void)
{
    engine_status = dnnl_lib.dnnl_engine_create(&engine, dnnl_cpu, 0);
}

int dnnl_lib_load(struct err *e)
{
    pthread_once(&env_once, env_set);
    if (lazy_lib_load(&lib, e) < 0)
        return -1;
    pthread_once(&engine_once, engine_create);
    if (engine_status != dnnl_success)
        return err_set(e, ERR_INTERNAL, "oneDNN: cannot create its CPU engine: %s", dnnl_lib.dnnl_status2str(engine_status));
    return 0;
}

dnnl_engine_t dnnl_lib_engine(void)
{
    return engine;
}
