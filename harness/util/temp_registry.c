/* temp_registry.c: see temp_registry.h. The paths live in static storage written before the slot is
 * marked live, so a signal arriving at any point finds either no entry or a complete one. */
#include "util/temp_registry.h"

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    volatile sig_atomic_t live;
    char path[PATH_MAX + 64];
} slots[TEMP_REGISTRY_SLOTS];

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static void remove_live(void)
{
    for (int i = 0; i < TEMP_REGISTRY_SLOTS; i++)
        if (slots[i].live) {
            unlink(slots[i].path);
            slots[i].live = 0;
        }
}

static void on_fatal_signal(int sig)
{
    remove_live();
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered with the default action once the handler returns */
}

static void install_once(void)
{
    static bool installed;
    if (installed)
        return;
    installed = true;
    atexit(remove_live);
    struct sigaction ours = {.sa_handler = on_fatal_signal};
    sigemptyset(&ours.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(fatal_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(fatal_signals[i], &ours, NULL);
    }
}

int temp_register(const char *path)
{
    size_t len = strlen(path);
    if (len >= sizeof slots[0].path)
        return -1;
    install_once();
    for (int i = 0; i < TEMP_REGISTRY_SLOTS; i++)
        if (!slots[i].live) {
            memcpy(slots[i].path, path, len + 1);
            __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the path is complete before the slot goes live */
            slots[i].live = 1;
            return i;
        }
    return -1;
}

void temp_unregister(int slot)
{
    if (slot >= 0 && slot < TEMP_REGISTRY_SLOTS)
        slots[slot].live = 0;
}
