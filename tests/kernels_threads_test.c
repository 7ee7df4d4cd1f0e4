/* kernels_threads_test.c: the split of chunked CPU kernels over the cores (kernels/cpu/cpu_threads.c): every
 * element visited once in whole chunks, whatever the thread limit; a worker stalled in its first chunk leaves
 * the chunks it has not claimed to the others; a split started from inside a chunk function (the pool busy),
 * kernels run from two threads at once, and a split in a child of fork (which has no workers) finish, with the
 * results of a run alone. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu_threads.h"
#include "kernels_test_util.h"

#define N ((size_t)3000000 + 17) /* enough for every core, and a short last chunk */
#define CHUNK ((size_t)4096)

static atomic_uchar visits[N];
static atomic_size_t bad_chunks, nested_done;

static void visit(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (i0 % CHUNK || (len != CHUNK && i0 + len != N))
        atomic_fetch_add(&bad_chunks, 1);
    for (size_t i = i0; i < i0 + len; i++)
        atomic_fetch_add(&visits[i], 1);
}

static void count_visits(const char *what)
{
    size_t once = 0;
    for (size_t i = 0; i < N; i++) {
        once += atomic_load(&visits[i]) == 1;
        atomic_store(&visits[i], 0);
    }
    ok(once == N && atomic_load(&bad_chunks) == 0, "%s: every element once (%zu of %zu), whole chunks (%zu not)", what,
       once, N, atomic_load(&bad_chunks));
    atomic_store(&bad_chunks, 0);
}

/* The first chunk of the outer split runs a whole split of its own. */
static void nest(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (i0 == 0) {
        cpu_for_chunks(k, t, N, CHUNK, visit);
        atomic_fetch_add(&nested_done, 1);
    }
}

static pthread_t caller;
static atomic_int stalled;         /* a worker has slept in its first chunk */
static atomic_size_t stalled_runs; /* chunks that worker ran */
static _Thread_local int is_stalled;

/* visit, where the first worker to come sleeps 50 ms in its first chunk. */
static void stall(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (!pthread_equal(pthread_self(), caller) && !is_stalled && !atomic_exchange(&stalled, 1)) {
        is_stalled = 1;
        usleep(50000);
    }
    if (is_stalled)
        atomic_fetch_add(&stalled_runs, 1);
    visit(k, t, i0, len);
}

struct adds {
    float *a, *b, *y;
    size_t n;
};

static void *add_many(void *arg)
{
    struct adds *s = arg;
    struct kernel_call k = KCALL(K_ADD, DT_F32, (int64_t)s->n);
    k.fparam[0] = 1.0f;
    k.fparam[1] = 2.0f;
    for (int r = 0; r < 20; r++)
        run(&k, (void *[]){s->a, s->b, s->y});
    return NULL;
}

int main(void)
{
    struct kernel_call k = KCALL(K_FILL, DT_F32, 1);
    for (unsigned limit = 0; limit <= 3; limit++) {
        kernel_cpu_set_threads(limit);
        cpu_for_chunks(&k, NULL, N, CHUNK, visit);
        char what[48];
        snprintf(what, sizeof what, "split with thread limit %u", limit);
        count_visits(what);
    }
    caller = pthread_self();
    kernel_cpu_set_threads(2);
    cpu_for_chunks(&k, NULL, N, CHUNK, stall);
    const size_t chunks = (N + CHUNK - 1) / CHUNK;
    ok(atomic_load(&stalled_runs) < chunks / 2,
       "a worker stalled 50 ms ran %zu of %zu chunks, less than a fixed half (%s)", atomic_load(&stalled_runs), chunks,
       atomic_load(&stalled) ? "it stalled" : "no worker came");
    count_visits("the split with a stalled worker");
    kernel_cpu_set_threads(0);
    cpu_for_chunks(&k, NULL, N, CHUNK, nest);
    ok(atomic_load(&nested_done) == 1, "a split inside a chunk function finishes");
    count_visits("the inner split");

    const size_t n = (size_t)1 << 21;
    float *a = rnd_vec(n, 1.0f), *b = rnd_vec(n, 1.0f), *want = zeros(n);
    struct adds alone = {a, b, want, n}, two[2] = {{a, b, zeros(n), n}, {a, b, zeros(n), n}};
    add_many(&alone);
    pthread_t th;
    int started = pthread_create(&th, NULL, add_many, &two[1]) == 0;
    add_many(&two[0]);
    if (started)
        pthread_join(th, NULL);
    ok(started && !memcmp(two[0].y, want, n * 4) && !memcmp(two[1].y, want, n * 4),
       "kernels from two threads at once: the results of a run alone");
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a child waiting for workers it does not have fails rather than hangs */
        add_many(&two[0]);
        _exit(memcmp(two[0].y, want, n * 4) != 0);
    }
    int status = -1;
    ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a split in a child of fork finishes with the same results");
    free(a), free(b), free(want), free(two[0].y), free(two[1].y);
    return done_testing();
}
