/* config.h: PYTORCH_CUDA_ALLOC_CONF, parsed with PyTorch's tokenizer, grammar, validation and wording
 * (reference/pytorch-allocator.md section 7, newest behaviour), and edited setting by setting by the
 * allocator fixes. What the allocator model does not model is refused here, for every command that
 * builds a config (run, fit, program, replay): `backend:cudaMallocAsync`. */
#ifndef OOMLAB_ALLOC_CONFIG_H
#define OOMLAB_ALLOC_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

#define ALLOC_ROUNDUP_INTERVALS 16
#define ALLOC_CONFIG_TEXT_MAX 512

struct alloc_config {
    uint64_t max_split_size;         /* bytes; UINT64_MAX = unlimited (default) */
    uint64_t max_non_split_rounding; /* bytes; default 20 MiB */
    uint32_t roundup_power2_divisions[ALLOC_ROUNDUP_INTERVALS];
    double garbage_collection_threshold; /* 0 = off */
    double per_process_memory_fraction;  /* 1.0 = no limit */
    bool expandable_segments;
    bool release_lock_on_cudamalloc;     /* accepted; no effect on a single-threaded model */
    bool pinned_use_cuda_host_register;  /* accepted; host pinned memory is outside the model */
    uint32_t pinned_num_register_threads;
    bool pinned_use_background_threads;
    bool graph_capture_record_stream_reuse;
    /* The settings as a PYTORCH_CUDA_ALLOC_CONF string: the one parsed (last_allocator_settings), then
     * each setting an alloc_config_set_* call added, so parsing `text` gives this config again. */
    char text[ALLOC_CONFIG_TEXT_MAX];
};

void alloc_config_default(struct alloc_config *c);

/* Parses a PYTORCH_CUDA_ALLOC_CONF string into c (which keeps PyTorch's reset rules: max_split_size,
 * roundup_power2_divisions and garbage_collection_threshold return to their defaults unless given).
 * Errors use PyTorch's wording, prefixed with the offending token's position. */
int alloc_config_parse(struct alloc_config *c, const char *s, struct err *e);

/* One setting each, applied as the entry "key:value" appended to `text` would be (the same checks and
 * wording as parsing it), and appended to `text`; -1 with e set, c unchanged, when the value is out of
 * PyTorch's range or the text would be too long. */
int alloc_config_set_expandable_segments(struct alloc_config *c, bool on, struct err *e);
int alloc_config_set_max_split_size_mb(struct alloc_config *c, uint64_t mb, struct err *e);
int alloc_config_set_garbage_collection_threshold(struct alloc_config *c, double threshold, struct err *e);

/* The divisions that apply to a request of `size` bytes (bucket clamp(floor(log2 size) - 20, 0, 15)). */
static inline uint32_t alloc_config_divisions(const struct alloc_config *c, uint64_t size)
{
    int log_size = size ? 63 - __builtin_clzll(size) : 0;
    int index = log_size - 20;
    if (index < 0)
        index = 0;
    if (index > ALLOC_ROUNDUP_INTERVALS - 1)
        index = ALLOC_ROUNDUP_INTERVALS - 1;
    return c->roundup_power2_divisions[index];
}

#endif
