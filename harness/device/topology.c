/* topology.c: see topology.h. */
#include "device/topology.h"

#include <hwloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/size.h"

int host_topology_read(struct host_topology *t, struct err *e)
{
    static const hwloc_obj_type_t caches[TOPOLOGY_CACHE_LEVELS] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE,
                                                                   HWLOC_OBJ_L3CACHE};
    *t = (struct host_topology){0};
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo))
        return err_set(e, ERR_INTERNAL, "hwloc: cannot initialise a topology");
    if (hwloc_topology_load(topo)) {
        hwloc_topology_destroy(topo);
        return err_set(e, ERR_INTERNAL, "hwloc: cannot read this machine's topology");
    }
    t->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    t->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    t->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    t->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    bool known = bound && hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0;
    for (hwloc_obj_t c = NULL; (c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, c));)
        t->cores_allowed += !known || hwloc_bitmap_intersects(c->cpuset, bound);
    hwloc_bitmap_free(bound);
    for (int l = 0; l < TOPOLOGY_CACHE_LEVELS; l++) {
        /* data or unified caches only: an L1 instruction cache is the same level's other half */
        for (hwloc_obj_t c = NULL; (c = hwloc_get_next_obj_by_type(topo, caches[l], c));) {
            if (c->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION)
                continue;
            t->cache_bytes[l] = c->attr->cache.size;
            t->cache_count[l]++;
        }
    }
    hwloc_topology_destroy(topo);
    return 0;
}

uint64_t host_topology_last_level_cache(const struct host_topology *t)
{
    for (int l = TOPOLOGY_CACHE_LEVELS; l-- > 0;)
        if (t->cache_count[l])
            return t->cache_bytes[l];
    return 0;
}

static const char *plural(int n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

void host_topology_format(const struct host_topology *t, char *buf, size_t n)
{
    static const char *const names[TOPOLOGY_CACHE_LEVELS] = {"L1d", "L2", "L3"};
    int w = snprintf(buf, n, "%d %s, %d NUMA %s, %d %s (%d this process may use), %d hardware %s", t->packages,
                     plural(t->packages, "package", "packages"), t->numa_nodes,
                     plural(t->numa_nodes, "node", "nodes"), t->cores, plural(t->cores, "core", "cores"),
                     t->cores_allowed, t->pus, plural(t->pus, "thread", "threads"));
    bool first = true;
    for (int l = 0; l < TOPOLOGY_CACHE_LEVELS && w > 0 && (size_t)w < n; l++) {
        if (!t->cache_count[l])
            continue;
        char size[32];
        size_format_pytorch(t->cache_bytes[l], size, sizeof size);
        char count[16] = "";
        if (t->cache_count[l] > 1)
            snprintf(count, sizeof count, " x%d", t->cache_count[l]);
        w += snprintf(buf + w, n - (size_t)w, "%s%s %s%s", first ? "; " : ", ", names[l], size, count);
        first = false;
    }
}
