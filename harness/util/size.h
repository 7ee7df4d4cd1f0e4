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

/* c10's format_size, as used in the OOM message: "512 bytes", "1.00 KiB", "20.00 MiB", "31.51 GiB". */
void size_format_pytorch(uint64_t n, char *buf, size_t len);

#endif
