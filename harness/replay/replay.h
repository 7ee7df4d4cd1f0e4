/* replay.h: replaying a trace through the one runner: a PyTorch memory snapshot (each device apart: its
 * events become ops, the state at trace start is rebuilt when recording began mid-run, and the run is
 * checked against what was recorded) or a text trace in oomlab's op-program form (read and run line by
 * line). */
#ifndef OOMLAB_REPLAY_H
#define OOMLAB_REPLAY_H

#include <stdbool.h>

#include "alloc/snapshot.h"
#include "program/program.h"
#include "run/result.h"
#include "util/err.h"
#include "util/size.h"

struct trace_input;

enum replay_addresses {
    ADDRESSES_AUTO,     /* recorded addresses when reproducing the recording, the sim's policy in a what-if */
    ADDRESSES_RECORDED, /* new segments take the addresses recorded in segment_alloc events */
    ADDRESSES_POLICY,   /* the sim's deterministic policy */
};

/* Unset fields reproduce the recording; set ones make a what-if. */
struct replay_options {
    const char *device;          /* NULL: a simulated device with room for everything the trace holds
                                  * (sim:rtx5090 when only a capacity is given) */
    struct capacity capacity;    /* {0, 0}: the device's own */
    const char *alloc_conf;      /* PYTORCH_CUDA_ALLOC_CONF text; NULL: the settings the snapshot recorded
                                  * (PyTorch's defaults when it records none, and for text traces) */
    const char *alloc_conf_from; /* where alloc_conf came from, for the report (NULL: "--alloc-conf") */
    const char *env_alloc_conf;  /* the environment's settings, used where the file records none */
    const char *env_name;        /* the variable they came from */
    enum replay_addresses addresses;
    const char *snapshot_path;   /* the replayed run written there as a PyTorch snapshot (snapshot_out.h) */
    const char *plot_dir;        /* pictures there: NAME-timeline and NAME-segments (.svg, .png), NAME the file's
                                  * name without its extensions ("stdin" for '-') */
    const char *perfetto_path;   /* the replayed run written there as a Perfetto/Chrome trace (perfetto.h) */
    bool stop_at_oom;            /* end at the first OOM, as a script that does not catch it (default: go on) */
    bool one_device;             /* replay only the snapshot's device cuda_device (--cuda-device N) */
    int cuda_device;
};

/* Replays the file at path ("-" = standard input; plain or gzip) into *jobs (malloc'd, *njobs of them; free
 * it): one job named "replay" for a text trace or a snapshot with one device to replay, else one per device
 * in order, named "device N". A snapshot's device with nothing to replay (no segments, no allocator events)
 * is named in a warning of the first job; when none has anything, the replay is of an empty device 0. Bad
 * input: ERR_INPUT naming file and position, *jobs NULL. */
int replay_path(const char *path, const struct replay_options *opt, struct job_result **jobs, size_t *njobs,
                struct err *e);

/* Reads a text trace from in and emits each line's op to sink as it is read (text_trace.c). */
int text_trace_run(struct trace_input *in, struct op_sink *sink, struct err *e);

#endif
