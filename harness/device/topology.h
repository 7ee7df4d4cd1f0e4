/* topology.h: the host's topology as hwloc reads it (packages, NUMA nodes, cores, hardware threads, the
 * cores this process may run on, and the data caches by level), for `oomlab devices`, the host device
 * (one kernel thread per core it may use) and the benchmarks (tensors sized from the last-level cache). */
#ifndef OOMLAB_TOPOLOGY_H
#define OOMLAB_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TOPOLOGY_CACHE_LEVELS 3

struct host_topology {
    int packages, numa_nodes, cores, pus;
    int cores_allowed;                           /* cores with a hardware thread this process is bound to */
    uint64_t cache_bytes[TOPOLOGY_CACHE_LEVELS]; /* L1d, L2, L3: size of one cache */
    int cache_count[TOPOLOGY_CACHE_LEVELS];      /* and how many there are */
};

/* 0, or -1 with e (ERR_INTERNAL) when hwloc cannot read the machine. */
int host_topology_read(struct host_topology *t, struct err *e);

/* "1 package, 1 NUMA node, 2 cores, 2 hardware threads; L1d 48.00 KiB x2, L2 2.00 MiB x2, L3 32.00 MiB" */
void host_topology_format(const struct host_topology *t, char *buf, size_t n);

/* The size of one cache of the last level hwloc found (L3, else L2, else L1d); 0 if none. */
uint64_t host_topology_last_level_cache(const struct host_topology *t);

#ifdef __cplusplus
}
#endif

#endif
