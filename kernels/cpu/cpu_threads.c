/* cpu_threads.c: the split of chunked CPU kernels over the cores (cpu_threads.h), on a pool of worker threads
 * started on first use and kept, so a kernel of a few hundred thousand elements (a layer of a small model)
 * is worth splitting: waking a waiting worker costs microseconds where starting a thread cost tens.
 * One call at a time uses the pool; a call made meanwhile (another thread's, or one from inside a
 * chunk function) runs its spans itself, with the same chunk boundaries, so the same results. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "cpu/cpu_threads.h"

/* Below this many elements per thread, waking a worker costs more than it saves. */
#define CPU_THREAD_MIN_ELEMS ((size_t)1 << 16)
#define CPU_MAX_THREADS 16

struct span {
    const struct kernel_call *k;
    void *const *t;
    cpu_chunk_fn *fn;
    size_t lo, hi, chunk;
};

static void run_span(const struct span *s)
{
    for (size_t i0 = s->lo; i0 < s->hi; i0 += s->chunk)
        s->fn(s->k, s->t, i0, s->hi - i0 < s->chunk ? s->hi - i0 : s->chunk);
}

/* Worker i (1 ..) runs spans[i] of each job it is part of (i < njob); the caller runs spans[0]. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t job;               /* bumped for each job */
    const struct span *spans;
    size_t njob, pending;       /* spans in the job; workers not yet finished with it */
    size_t nworkers;            /* started */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, 0, 0, 0};

static pthread_mutex_t pool_user = PTHREAD_MUTEX_INITIALIZER; /* held by the call using the pool */

static void *worker(void *arg)
{
    const size_t id = (size_t)(uintptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.job == seen)
            pthread_cond_wait(&pool.wake, &pool.mu);
        seen = pool.job;
        if (id >= pool.njob)
            continue;
        const struct span *s = &pool.spans[id];
        pthread_mutex_unlock(&pool.mu);
        run_span(s);
        pthread_mutex_lock(&pool.mu);
        if (--pool.pending == 0)
            pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A child of fork has none of the workers, and whatever lock another thread held: it starts afresh. */
static void pool_forget(void)
{
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_init(&pool_user, NULL);
    pool.nworkers = pool.njob = pool.pending = 0;
}

/* Workers 1 .. want - 1 started (as many as can be): how many spans the pool can run at once. */
static size_t pool_grow(size_t want)
{
    static int forget_at_fork; /* pool_forget registered */
    if (!forget_at_fork && want > 1)
        forget_at_fork = pthread_atfork(NULL, NULL, pool_forget) == 0;
    if (!forget_at_fork)
        return 1;
    while (pool.nworkers + 1 < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker, (void *)(uintptr_t)(pool.nworkers + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pool.nworkers++;
    }
    return pool.nworkers + 1 < want ? pool.nworkers + 1 : want;
}

/* Runs spans[0 .. n): on the pool when it is free, else here, one after another. */
static void run_spans(const struct span *spans, size_t n)
{
    size_t on_pool = 0;
    if (n > 1 && pthread_mutex_trylock(&pool_user) == 0) {
        pthread_mutex_lock(&pool.mu);
        on_pool = pool_grow(n);
        if (on_pool > 1) {
            pool.spans = spans;
            pool.njob = on_pool;
            pool.pending = on_pool - 1;
            pool.job++;
            pthread_cond_broadcast(&pool.wake);
        }
        pthread_mutex_unlock(&pool.mu);
    }
    run_span(&spans[0]);
    for (size_t i = on_pool > 1 ? on_pool : 1; i < n; i++)
        run_span(&spans[i]); /* no worker to be had: this thread does the work */
    if (on_pool) {
        pthread_mutex_lock(&pool.mu);
        while (on_pool > 1 && pool.pending)
            pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
        pthread_mutex_unlock(&pool_user);
    }
}

static unsigned thread_limit; /* kernel_cpu_set_threads; 0: none */

void kernel_cpu_set_threads(unsigned n)
{
    thread_limit = n;
}

size_t cpu_threads_most(void)
{
    cpu_set_t set;
    size_t cores = sched_getaffinity(0, sizeof set, &set) == 0 ? (size_t)CPU_COUNT(&set) : 1;
    if (thread_limit && thread_limit < cores)
        cores = thread_limit;
    return cores < CPU_MAX_THREADS ? cores : CPU_MAX_THREADS;
}

static size_t thread_count(size_t n)
{
    size_t want = n / CPU_THREAD_MIN_ELEMS;
    if (want < 2)
        return 1;
    size_t most = cpu_threads_most();
    return want < most ? want : most;
}

void cpu_for_chunks(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, cpu_chunk_fn *fn)
{
    cpu_for_chunks_of(k, t, n, chunk, n, fn);
}

void cpu_for_chunks_of(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, size_t work,
                       cpu_chunk_fn *fn)
{
    const size_t chunks = (n + chunk - 1) / chunk, most = thread_count(work);
    const size_t nthreads = most < chunks ? most : chunks ? chunks : 1;
    const size_t per = (chunks + nthreads - 1) / nthreads * chunk; /* whole chunks per thread */
    struct span spans[CPU_MAX_THREADS];
    for (size_t i = 0; i < nthreads; i++) {
        size_t lo = i * per < n ? i * per : n, hi = lo + per < n ? lo + per : n;
        spans[i] = (struct span){k, t, fn, lo, hi, chunk};
    }
    run_spans(spans, nthreads);
}
