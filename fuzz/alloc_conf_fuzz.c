/* alloc_conf_fuzz.c: PYTORCH_CUDA_ALLOC_CONF parsing on arbitrary strings: a PyTorch-worded error or
 * a config whose values are in their documented ranges. */
#include "alloc/config.h"
#include "fuzz.h"

FUZZ_TARGET(alloc_conf)
{
    char *s = fuzz_string(data, size);
    if (!s)
        return 0;
    struct alloc_config c;
    struct err e = {0};
    alloc_config_default(&c);
    if (alloc_config_parse(&c, s, &e)) {
        fuzz_require(e.code != ERR_NONE && e.msg[0], "a failed parse says why");
    } else {
        fuzz_require(c.per_process_memory_fraction >= 0.0 && c.per_process_memory_fraction <= 1.0,
                     "memory fraction in [0, 1], as PyTorch checks it: %g", c.per_process_memory_fraction);
        fuzz_require(c.garbage_collection_threshold >= 0.0 && c.garbage_collection_threshold < 1.0,
                     "gc threshold in [0, 1): %g", c.garbage_collection_threshold);
        for (uint64_t size_bytes = 1; size_bytes && size_bytes < (UINT64_C(1) << 50); size_bytes <<= 3)
            (void)alloc_config_divisions(&c, size_bytes);
    }
    free(s);
    return 0;
}
