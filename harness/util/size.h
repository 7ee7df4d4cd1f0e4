/* size.h: the one number syntax oomlab reads (README "Number syntax"), byte sizes as people write them
 * ("31.5GiB", "100MiB", "512"), device capacities, and sizes as PyTorch prints them.
 *
 * Integers (counts, streams, indices) are decimal digits only: "010" is ten, "08" is eight; no sign,
 * no "0x", no exponent, no separators, no spaces. Sizes are a decimal number (digits, optionally a
 * point and more digits: "1.5", never ".5", "1e9" or "0x10") and an optional unit, with optional
 * spaces between. Sizes and capacities above SIZE_LIMIT are refused, which keeps every byte figure
 * the allocator model adds up (PyTorch's int64 stats) far from overflow. */
#ifndef OOMLAB_SIZE_H
#define OOMLAB_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define KiB (1024ULL)
#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * 1024ULL * 1024ULL)

/* The largest size or capacity oomlab accepts: 4 EiB (2^62 bytes). */
#define SIZE_LIMIT (UINT64_C(1) << 62)

/* An integer in [min, max] written in decimal digits only. Messages quote the text and say what was
 * wrong ("'0x10' is not a decimal integer (digits 0-9 only)", "'99' is out of range 0..64");
 * callers prefix where it was ("trace.txt:3:12: stream "). ERR_INPUT. */
int uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct err *e);

/* A non-negative size: a decimal number with an optional unit B, KiB, MiB, GiB, TiB (binary) or KB, MB,
 * GB, TB (decimal); no unit is bytes. Fractional bytes round down, exactly ("0.3KiB" is 307). At most
 * SIZE_LIMIT. ERR_INPUT. */
int size_parse(const char *s, uint64_t *out, struct err *e);

/* A device capacity as written: a size, or a share of the device's full memory (as
 * torch.cuda.set_per_process_memory_fraction takes one). Both 0: the device's own default. */
struct capacity {
    uint64_t bytes;
    double fraction; /* (0, 1] */
};

/* "24GiB", "100MiB" (a size needs its unit), a bare fraction in (0, 1] ("0.5") or a percentage in
 * (0, 100] ("50%"), each in the number syntax above. A bare number above 1 ("24") and zero are refused:
 * a device of 24 bytes or of no memory is a typo. */
int capacity_parse(const char *s, struct capacity *out, struct err *e);

/* The capacity of a device whose full memory is `full`: c.bytes, else full x c.fraction, else dflt.
 * A share that rounds to 0 bytes of `full` is refused (ERR_INPUT). */
int capacity_resolve(struct capacity c, uint64_t full, uint64_t dflt, uint64_t *out, struct err *e);

/* A size as a flag takes it, rounded up so it still holds n: "512MiB", "56.92GiB". */
void size_format_flag(uint64_t n, char *buf, size_t len);

/* c10's format_size, as used in the OOM message: "512 bytes", "1.00 KiB", "20.00 MiB", "31.51 GiB". */
void size_format_pytorch(uint64_t n, char *buf, size_t len);

#endif
