/* cpu_threads.c: the split of chunked CPU kernels over the cores (cpu_threads.h), on a pool of worker threads
 * started on first use and kept, so a kernel of a few hundred thousand elements (a layer of a small model)
 * is worth splitting: waking a waiting worker costs microseconds where starting a thread cost tens.
 * The threads of a split claim runs of its chunks as they become free (struct job). One call at a time uses
 * the pool; a call made meanwhile (another thread's, or one from inside a chunk function) runs all its chunks
 * itself: the same chunk boundaries, so the same results. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "cpu/cpu_threads.h"

/* Below this many elements per thread, waking a worker costs more than it saves. */
#define CPU_THREAD_MIN_ELEMS ((size_t)1 << 16)
#define CPU_MAX_THREADS 16

/* fn over [0, n) in chunks, shared by the threads of a split: each claims the next run of chunks when it is
 * free, so a worker that wakes late, or whose core a neighbour's process holds, leaves what it has not claimed
 * to the others rather than the caller waiting for it (exact GELU over 131,072 elements on two loaded cores,
 * fastest of 300 calls: 0.030 ms in fixed halves, 0.027 claimed, as on one core; measured). */
struct job {
    const struct kernel_call *k;
    void *const *t;
    cpu_chunk_fn *fn;
    size_t n, chunk, chunks, threads;
    atomic_size_t next; /* the first chunk not claimed */
};

/* Claims and runs runs of chunks until none is left: a 2 * threads-th of what remains (at least one chunk),
 * large runs first and short ones at the end, so the threads finish together in a few dozen claims. */
static void run_job(struct job *j)
{
    size_t c = atomic_load_explicit(&j->next, memory_order_relaxed);
    while (c < j->chunks) {
        size_t take = (j->chunks - c) / (2 * j->threads);
        take = take ? take : 1;
        if (!atomic_compare_exchange_weak_explicit(&j->next, &c, c + take, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        const size_t end = (c + take) * j->chunk < j->n ? (c + take) * j->chunk : j->n;
        for (size_t i0 = c * j->chunk; i0 < end; i0 += j->chunk)
            j->fn(j->k, j->t, i0, end - i0 < j->chunk ? end - i0 : j->chunk);
        c = atomic_load_explicit(&j->next, memory_order_relaxed);
    }
}

/* Workers 1 .. want - 1 join the open job (the caller runs it too); the caller closes it when every chunk is
 * claimed, so a worker that wakes after that leaves it alone, and waits for the workers still in it. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint_least64_t seq; /* bumped for each job */
    struct job *job;  /* the open job, NULL when closed */
    size_t want;      /* threads the job may use, the caller's included */
    atomic_size_t busy; /* workers in the job */
    size_t nworkers;  /* started */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, 0, 0, 0};

static pthread_mutex_t pool_user = PTHREAD_MUTEX_INITIALIZER; /* held by the call using the pool */

/* How long a worker that finished a job, or a caller waiting for its workers, keeps looking before it sleeps on
 * a condition variable: a sleep and a wake-up between the two cores of this VM cost 26 us at best, 47 in the
 * median (a condition-variable round trip, measured under load), a tenth of a two-thread GELU over 2M elements,
 * and a model's kernels often come back to back. A worker looks only if its last job came that soon after the one
 * before, and yields its core meanwhile to anything else that can run, as OpenBLAS's waiting threads do; the
 * caller, in the middle of its kernel, keeps it. */
#define CPU_SPIN_NS 100000L

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int seq_moved(const void *seen)
{
    return atomic_load_explicit(&pool.seq, memory_order_relaxed) != *(const uint64_t *)seen;
}

static int workers_out(const void *unused)
{
    return atomic_load_explicit(&pool.busy, memory_order_acquire) == 0;
}

static long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Checks done(arg) for up to CPU_SPIN_NS, yielding the core between checks if `yield`. */
static void spin_for(int (*done)(const void *), const void *arg, int yield)
{
    const long t0 = mono_ns();
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (done(arg))
                return;
            cpu_relax();
        }
        if (mono_ns() - t0 > CPU_SPIN_NS)
            return;
        if (yield)
            sched_yield();
    }
}

static void *worker(void *arg)
{
    const size_t id = (size_t)(uintptr_t)arg;
    uint64_t seen = 0;
    int spin = 1; /* the last job came within CPU_SPIN_NS: so may the next (not when a GEMM runs between) */
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        if (pool.seq == seen) {
            pthread_mutex_unlock(&pool.mu);
            const long t0 = mono_ns();
            if (spin)
                spin_for(seq_moved, &seen, 1);
            pthread_mutex_lock(&pool.mu);
            while (pool.seq == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            spin = mono_ns() - t0 <= CPU_SPIN_NS;
        }
        seen = pool.seq;
        struct job *j = pool.job;
        if (!j || id >= pool.want)
            continue;
        pool.busy++;
        pthread_mutex_unlock(&pool.mu);
        run_job(j);
        pthread_mutex_lock(&pool.mu);
        if (--pool.busy == 0)
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
    pool.job = NULL;
    pool.nworkers = pool.want = 0;
    atomic_store(&pool.busy, 0);
}

/* Workers 1 .. want - 1 started (as many as can be): how many threads the pool can run at once. */
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

/* Runs j on up to `threads` threads: the pool's when it is free, else this one alone. */
static void run_split(struct job *j, size_t threads)
{
    size_t on_pool = 0;
    j->threads = 1;
    if (threads > 1 && pthread_mutex_trylock(&pool_user) == 0) {
        pthread_mutex_lock(&pool.mu);
        on_pool = pool_grow(threads);
        if (on_pool > 1) {
            j->threads = on_pool;
            pool.job = j;
            pool.want = on_pool;
            pool.seq++;
            pthread_cond_broadcast(&pool.wake);
        }
        pthread_mutex_unlock(&pool.mu);
    }
    run_job(j);
    if (on_pool) {
        pthread_mutex_lock(&pool.mu);
        pool.job = NULL;
        if (pool.busy) {
            pthread_mutex_unlock(&pool.mu);
            spin_for(workers_out, NULL, 0);
            pthread_mutex_lock(&pool.mu);
        }
        while (pool.busy)
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
    struct job j = {k, t, fn, n, chunk, (n + chunk - 1) / chunk, 1, 0};
    const size_t most = thread_count(work);
    run_split(&j, most < j.chunks ? most : j.chunks);
}
