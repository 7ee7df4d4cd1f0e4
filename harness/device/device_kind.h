/* device_kind.h: the device-kind table (as fio's ioengine table): one row per kind of device (sim,
 * host, cuda) with its name, the forms of its spec, its flags (enum device_flag), and its parse,
 * probe and open. Every caller that reads a device spec ("sim", "sim:rtx5090", "sim:24GiB", "host",
 * "host:25%", "host:2GiB", "cuda", "cuda:1") goes through device_spec_parse, and every device is made
 * by device_open. Adding a kind of device is one file defining its row, and a line in the table. */
#ifndef OOMLAB_DEVICE_KIND_H
#define OOMLAB_DEVICE_KIND_H

#include <stdbool.h>
#include <stddef.h>

#include "device/device.h"
#include "device/profiles.h"
#include "util/err.h"
#include "util/size.h"

/* The device a scenario runs on when it names none, and replay's. */
#define DEVICE_DEFAULT "sim:" GPU_PROFILE_DEFAULT

/* A device spec, parsed. */
struct device_spec {
    const struct device_kind *kind;
    char text[64];                      /* as written: "sim:24GiB" */
    const struct gpu_profile *profile;  /* sim: its profile, the default one for a bare size; else NULL */
    int cuda_major, cuda_minor;         /* sim: the CUDA version of a @cudaMAJOR.MINOR suffix, whose
                                         * context replaces the profile's; 0.0 without one */
    struct capacity own;                /* sim:SIZE, host:SIZE|FRACTION; {0, 0}: the kind's default */
    int ordinal;                        /* cuda:N */
};

struct device_open_options {
    struct capacity capacity;         /* --capacity; {0, 0}: the spec's own */
    /* The job's cuBLAS workspace per stream (job.cublas_workspace); 0: the device's own, PyTorch's
     * default for its architecture. The device reports the result in cublas_workspace_bytes, which
     * the op program allocates and a GPU's cuBLAS then uses. */
    uint64_t cublas_workspace_bytes;
};

/* What `oomlab devices` says about a kind on this machine. */
struct device_probe {
    bool available;
    char capacity[32]; /* its default capacity ("-" if unknown) */
    char notes[768];   /* what it is, or when unavailable, "unavailable: " and why */
};

struct device_kind {
    const char *name;  /* a spec is NAME or NAME:ARG */
    const char *forms; /* "sim, sim:PROFILE, sim:SIZE", for messages */
    unsigned flags;    /* enum device_flag */
    /* Checks the text after "NAME:" (NULL for a bare NAME) and fills out's fields for this kind;
     * -1 with e (ERR_INPUT) saying what is wrong, without the spec itself. */
    int (*parse)(const char *arg, struct device_spec *out, struct err *e);
    void (*probe)(struct device_probe *out);
    /* NULL with e set: ERR_INPUT when the spec cannot be met here (no GPU, a capacity of 0). */
    struct device *(*open)(const struct device_spec *spec, const struct device_open_options *opt, struct err *e);
};

size_t device_kind_count(void);
const struct device_kind *device_kind_at(size_t i);

/* Parses a device spec: 0, or -1 with e (ERR_INPUT): "unknown device 'tpu' (devices: ...)", "nothing
 * after the ':' in 'sim:'", or the kind's own message ("unknown GPU profile 'rtx5080' (did you mean
 * 'rtx5090'?)"). Messages do not repeat the spec: callers say where it came from. */
int device_spec_parse(const char *text, struct device_spec *out, struct err *e);

/* Opens a parsed spec (opt NULL: all defaults), applying the workspace rule above: the job's cuBLAS
 * workspace when it sets one, else the device's. */
struct device *device_open_spec(const struct device_spec *spec, const struct device_open_options *opt, struct err *e);
/* device_spec_parse, then device_open_spec; a parse error is prefixed "device TEXT: ". */
struct device *device_open(const char *text, const struct device_open_options *opt, struct err *e);

#endif
