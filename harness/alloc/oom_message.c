/* oom_message.c: the OutOfMemoryError text of PyTorch 2.2+ (CUDACachingAllocator.cpp malloc), with
 * c10::format_size. Private pools are not modelled, so the "allocated in private pools" part never shows. */
#include <stdio.h>

#include "alloc/allocator.h"
#include "util/size.h"

void alloc_oom_message(const struct alloc_oom *o, int device_index, char *buf, size_t len)
{
    if (o->too_large) {
        snprintf(buf, len, "CUDA out of memory. Tried to allocate more than 1EB memory.");
        return;
    }
    char tried[32], total[32], free_s[32], allowed[64] = "", allocated[32], unallocated[32];
    size_format_pytorch(o->alloc_size, tried, sizeof tried);
    size_format_pytorch(o->device_total, total, sizeof total);
    size_format_pytorch(o->device_free, free_s, sizeof free_s);
    if (o->has_allowed) {
        char a[32];
        size_format_pytorch(o->allowed, a, sizeof a);
        snprintf(allowed, sizeof allowed, "%s allowed; ", a);
    }
    size_format_pytorch(o->allocated, allocated, sizeof allocated);
    size_format_pytorch(o->reserved - o->allocated, unallocated, sizeof unallocated);
    snprintf(buf, len,
             "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "
             "%sOf the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. "
             "If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
             "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
             tried, device_index, total, free_s, allowed, allocated, unallocated);
}
