/* size.h: byte sizes as people write them ("31.5GiB", "100MiB", "512") and as PyTorch prints them. */
#ifndef OOMLAB_SIZE_H
#define OOMLAB_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define KiB (1024ULL)
#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * 1024ULL * 1024ULL)

/* Parses a non-negative size: an integer or decimal number with an optional unit
 * B, KiB, MiB, GiB, TiB (binary) or KB, MB, GB, TB (decimal). Fractional bytes round down. */
int size_parse(const char *s, uint64_t *out, struct err *e);

/* A device capacity as written: a size, or a share of the device's full memory (as
 * torch.cuda.set_per_process_memory_fraction takes one). Both 0: the device's own default. */
struct capacity {
    uint64_t bytes;
    double fraction; /* (0, 1] */
};

/* "24GiB", "100MiB", a bare byte count above 1, a bare fraction in (0, 1] ("0.5") or a percentage
 * in (0, 100] ("50%"). Zero is rejected: a device of no memory is a typo. */
int capacity_parse(const char *s, struct capacity *out, struct err *e);

/* The capacity of a device whose full memory is `full`: c.bytes, else full x c.fraction, else dflt. */
uint64_t capacity_resolve(struct capacity c, uint64_t full, uint64_t dflt);

/* A size as a flag takes it, rounded up so it still holds n: "512MiB", "56.92GiB". */
void size_format_flag(uint64_t n, char *buf, size_t len);

/* c10's format_size, as used in the OOM message: "512 bytes", "1.00 KiB", "20.00 MiB", "31.51 GiB". */
void size_format_pytorch(uint64_t n, char *buf, size_t len);

#endif
