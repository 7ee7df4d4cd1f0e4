// cuda_vmm.cu: the plugin's virtual memory for expandable segments: cuMemAddressReserve,
// cuMemCreate + cuMemMap + cuMemSetAccess per granule, cuMemUnmap + cuMemRelease, cuMemAddressFree,
// all through cudaGetDriverEntryPointByVersion so the plugin never links libcuda.
#include <stdio.h>

#include "device/cuda/cuda_impl.h"

#define DRIVER_API_VERSION 12000 // the ABI version of the cuMem* functions we call

template <class F> static bool entry(const char *name, F *fn, char *why, size_t n)
{
    void *p = NULL;
    cudaDriverEntryPointQueryResult status;
    cudaError_t rc = cudaGetDriverEntryPointByVersion(name, &p, DRIVER_API_VERSION, cudaEnableDefault, &status);
    if (rc != cudaSuccess || status != cudaDriverEntryPointSuccess || !p) {
        snprintf(why, n, "%s not found in the driver (%s)", name, rc != cudaSuccess ? cudaGetErrorString(rc) : "symbol missing");
        return false;
    }
    *fn = (F)p;
    return true;
}

bool cuda_vmm_init(cuda_dev *c, char *why, size_t n)
{
    cuda_driver *d = &c->drv;
    if (!entry("cuMemAddressReserve", &d->mem_address_reserve, why, n) ||
        !entry("cuMemAddressFree", &d->mem_address_free, why, n) || !entry("cuMemCreate", &d->mem_create, why, n) ||
        !entry("cuMemRelease", &d->mem_release, why, n) || !entry("cuMemMap", &d->mem_map, why, n) ||
        !entry("cuMemUnmap", &d->mem_unmap, why, n) || !entry("cuMemSetAccess", &d->mem_set_access, why, n) ||
        !entry("cuMemGetAllocationGranularity", &d->mem_get_allocation_granularity, why, n) ||
        !entry("cuGetErrorString", &d->get_error_string, why, n))
        return false;
    memset(&c->prop, 0, sizeof c->prop);
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = c->ordinal;
    CUresult r = d->mem_get_allocation_granularity(&c->granularity, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) {
        snprintf(why, n, "cuMemGetAllocationGranularity failed (%d)", (int)r);
        return false;
    }
    return true;
}

static const char *drv_error(cuda_dev *c, CUresult r)
{
    const char *s = NULL;
    return c->drv.get_error_string(r, &s) == CUDA_SUCCESS && s ? s : "unknown driver error";
}

enum dev_status cuda_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e)
{
    cuda_dev *c = cuda_of(d);
    CUdeviceptr p = 0;
    CUresult r = c->drv.mem_address_reserve(&p, size, 0, 0, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return DEV_OOM;
    if (r != CUDA_SUCCESS) {
        cuda_fail(e, ERR_INTERNAL, "%s: cuMemAddressReserve(%llu): %s", d->name, (unsigned long long)size, drv_error(c, r));
        return DEV_ERROR;
    }
    *addr = (uint64_t)p;
    return DEV_OK;
}

void cuda_va_release(struct device *d, uint64_t addr, uint64_t size)
{
    cuda_dev *c = cuda_of(d);
    cuda_unmap(d, addr, size); // whatever is still mapped inside goes first
    c->drv.mem_address_free((CUdeviceptr)addr, size);
}

enum dev_status cuda_map(struct device *d, uint64_t addr, uint64_t size, struct err *e)
{
    cuda_dev *c = cuda_of(d);
    const uint64_t g = c->granularity;
    if (addr % g || size % g) {
        cuda_fail(e, ERR_INTERNAL, "%s: map of [%#llx, +%llu) is not aligned to the %llu-byte granularity", d->name,
                  (unsigned long long)addr, (unsigned long long)size, (unsigned long long)g);
        return DEV_ERROR;
    }
    if (cuda_over_limit(c, size))
        return DEV_OOM;
    CUmemAccessDesc access = {};
    access.location = c->prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (uint64_t off = 0; off < size; off += g) {
        CUmemGenericAllocationHandle h;
        CUresult r = c->drv.mem_create(&h, g, &c->prop, 0);
        if (r == CUDA_SUCCESS) {
            r = c->drv.mem_map((CUdeviceptr)(addr + off), g, 0, h, 0);
            if (r != CUDA_SUCCESS)
                c->drv.mem_release(h);
        }
        if (r == CUDA_SUCCESS && (r = c->drv.mem_set_access((CUdeviceptr)(addr + off), g, &access, 1)) != CUDA_SUCCESS) {
            c->drv.mem_unmap((CUdeviceptr)(addr + off), g);
            c->drv.mem_release(h);
        }
        if (r != CUDA_SUCCESS) {
            cuda_unmap(d, addr, off); // all or nothing
            if (r == CUDA_ERROR_OUT_OF_MEMORY)
                return DEV_OOM;
            cuda_fail(e, ERR_INTERNAL, "%s: mapping %llu bytes at %#llx: %s", d->name, (unsigned long long)g,
                      (unsigned long long)(addr + off), drv_error(c, r));
            return DEV_ERROR;
        }
        c->pages[addr + off] = h;
        c->used += g;
    }
    return DEV_OK;
}

void cuda_unmap(struct device *d, uint64_t addr, uint64_t size)
{
    cuda_dev *c = cuda_of(d);
    auto it = c->pages.lower_bound(addr);
    while (it != c->pages.end() && it->first < addr + size) {
        c->drv.mem_unmap((CUdeviceptr)it->first, c->granularity);
        c->drv.mem_release(it->second);
        c->used -= c->granularity;
        it = c->pages.erase(it);
    }
}

void cuda_vmm_release_all(cuda_dev *c)
{
    for (auto &p : c->pages) {
        c->drv.mem_unmap((CUdeviceptr)p.first, c->granularity);
        c->drv.mem_release(p.second);
    }
    c->pages.clear();
}
