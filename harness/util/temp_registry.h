/* temp_registry.h: temporary files that must not outlive the process. A registered path is unlinked
 * when the process exits through exit() or is ended by SIGINT, SIGTERM, SIGHUP or SIGPIPE (the
 * handler then raises the signal again with its default action). Handlers are installed at the first
 * registration, only for signals still at their default action. The handler uses only
 * async-signal-safe calls (unlink, sigaction, raise). Not thread-safe: register and unregister from
 * one thread. */
#ifndef OOMLAB_TEMP_REGISTRY_H
#define OOMLAB_TEMP_REGISTRY_H

#define TEMP_REGISTRY_SLOTS 16  /* temporaries alive at once */

/* Registers `path` before the file is created; returns its slot, or -1 when the path is too long or
 * every slot is taken. */
int temp_register(const char *path);
/* Forgets a slot (after the file was renamed or removed); -1 is ignored. */
void temp_unregister(int slot);

#endif
