/* alloc_config_test.c: PYTORCH_CUDA_ALLOC_CONF parsing (good strings, PyTorch's reset rules, and bad strings
 * with PyTorch's wording and the position), and c10::format_size. */
#include "tap.h"

#include "alloc/config.h"
#include "util/size.h"

static void good(const char *s, struct alloc_config *c)
{
    struct err e = {0};
    alloc_config_default(c);
    ok(alloc_config_parse(c, s, &e) == 0, "accepts '%s' %s", s, e.msg);
}

static void bad(const char *s, const char *want)
{
    struct alloc_config c;
    struct err e = {0};
    alloc_config_default(&c);
    int rc = alloc_config_parse(&c, s, &e);
    ok(rc == -1 && e.code == ERR_INPUT, "rejects '%s'", s);
    is_str(e.msg, want, "message for '%s'", s);
}

int main(void)
{
    struct alloc_config c;
    good("", &c);
    is_u64(c.max_split_size, UINT64_MAX, "default max_split_size unlimited");
    is_u64(c.max_non_split_rounding, 20 * MiB, "default max_non_split_rounding 20 MiB");
    good("expandable_segments:True", &c);
    ok(c.expandable_segments, "expandable_segments:True");
    good("expandable_segments:False,", &c);
    ok(!c.expandable_segments, "trailing comma tolerated");
    good(" max_split_size_mb : 128 , garbage_collection_threshold:0.7 ", &c);
    is_u64(c.max_split_size, 128 * MiB, "spaces dropped; max_split_size_mb:128");
    ok(c.garbage_collection_threshold == 0.7, "garbage_collection_threshold:0.7");
    good("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:16,garbage_collection_threshold:0.7",
         &c);
    is_int(c.roundup_power2_divisions[0], 16, "the reported RTX 5090 string parses: divisions 16");
    good("max_split_size_mb:20", &c);
    is_u64(c.max_split_size, 20 * MiB, "20 is the minimum (newest: >= 20)");
    good("max_non_split_rounding_mb:64,backend:native,release_lock_on_cudamalloc:True", &c);
    is_u64(c.max_non_split_rounding, 64 * MiB, "max_non_split_rounding_mb:64");
    good("pinned_use_cuda_host_register:True,pinned_num_register_threads:8,pinned_use_background_threads:False", &c);
    is_int(c.pinned_num_register_threads, 8, "pinned_num_register_threads:8");
    good("per_process_memory_fraction:0.5", &c);
    ok(c.per_process_memory_fraction == 0.5, "per_process_memory_fraction:0.5");
    good("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &c);
    is_int(alloc_config_divisions(&c, 100 * MiB), 1, "docs example: < 256 MiB get 1");
    is_int(alloc_config_divisions(&c, 300 * MiB), 1, "[256,512) MiB get 1");
    is_int(alloc_config_divisions(&c, 600 * MiB), 2, "[512,1024) MiB get 2");
    is_int(alloc_config_divisions(&c, 3 * GiB), 8, ">= 2 GiB get 8");

    /* PyTorch's reset rule: a new parse forgets max_split_size, divisions and GC threshold, keeps the rest. */
    struct err e = {0};
    alloc_config_default(&c);
    alloc_config_parse(&c, "max_split_size_mb:200,expandable_segments:True,roundup_power2_divisions:4", &e);
    alloc_config_parse(&c, "garbage_collection_threshold:0.5", &e);
    is_u64(c.max_split_size, UINT64_MAX, "re-parse resets max_split_size");
    is_int(c.roundup_power2_divisions[3], 0, "re-parse resets roundup_power2_divisions");
    ok(c.expandable_segments, "re-parse keeps expandable_segments");

    bad("max_split_size_mb:19", "allocator config 'max_split_size_mb:19', column 19: CachingAllocator option "
                                "max_split_size_mb too small, must be >= 20");
    bad("max_non_split_rounding_mb:1", "allocator config 'max_non_split_rounding_mb:1', column 27: CachingAllocator "
                                       "option max_non_split_rounding_mb too small, must be >= 20");
    bad("expandable_segments:true",
        "allocator config 'expandable_segments:true', column 21: Expected a single True/False argument for "
        "expandable_segments");
    bad("garbage_collection_threshold:1.0", "allocator config 'garbage_collection_threshold:1.0', column 30: "
                                            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    bad("garbage_collection_threshold:0", "allocator config 'garbage_collection_threshold:0', column 30: "
                                          "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    bad("roundup_power2_divisions:3", "allocator config 'roundup_power2_divisions:3', column 26: For roundups, the "
                                      "divisions has to be power of 2");
    bad("roundup_power2_divisions:[256:3]", "allocator config 'roundup_power2_divisions:[256:3]', column 31: For "
                                            "roundups, the divisions has to be power of 2 or 0 to disable roundup");
    bad("roundup_power2_divisions:[100:4]", "allocator config 'roundup_power2_divisions:[100:4]', column 27: For "
                                            "roundups, the intervals have to be power of 2");
    bad("malloc_fraction=0.5", "allocator config 'malloc_fraction=0.5', column 1: Unrecognized key "
                               "'malloc_fraction=0.5' in CUDA allocator config.");
    bad("max_split_size_mb=128", "allocator config 'max_split_size_mb=128', column 1: Unrecognized key "
                                 "'max_split_size_mb=128' in CUDA allocator config.");
    bad("max_split_size_mb", "allocator config 'max_split_size_mb', column 18: Error parsing "
                             "CachingAllocator::AllocatorConfig settings, expected :");
    bad("max_split_size_mb:-5", "allocator config 'max_split_size_mb:-5', column 19: invalid value '-5' for "
                                "max_split_size_mb: must not be negative");
    bad("max_split_size_mb:abc", "allocator config 'max_split_size_mb:abc', column 19: invalid value 'abc' for "
                                 "max_split_size_mb: expected an integer");
    bad("expandable_segments:True;max_split_size_mb:128",
        "allocator config 'expandable_segments:True;max_split_size_mb:128', column 21: Expected a single True/False "
        "argument for expandable_segments");
    bad("backend:jemalloc", "allocator config 'backend:jemalloc', column 9: Unknown allocator backend, options are "
                            "native and cudaMallocAsync");
    bad("per_process_memory_fraction:1.5", "allocator config 'per_process_memory_fraction:1.5', column 29: "
                                           "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    bad("pinned_num_register_threads:256", "allocator config 'pinned_num_register_threads:256', column 29: Number "
                                           "of register threads should be less than or equal to 128");
    bad("expandable_segments:True max_split_size_mb:128",
        "allocator config 'expandable_segments:True max_split_size_mb:128', column 21: Expected a single True/False "
        "argument for expandable_segments");
    bad(",", "allocator config ',', column 1: Unrecognized key ',' in CUDA allocator config.");

    /* format_size */
    static const struct {
        uint64_t n;
        const char *s;
    } fs[] = {
        {0, "0 bytes"}, {512, "512 bytes"}, {1024, "1024 bytes"}, {1025, "1.00 KiB"}, {MiB, "1024.00 KiB"},
        {MiB + 1, "1.00 MiB"}, {2 * MiB, "2.00 MiB"}, {GiB, "1024.00 MiB"}, {GiB + 1, "1.00 GiB"},
        {80 * GiB, "80.00 GiB"}, {800000000ULL * GiB, "800000000.00 GiB"}, {32266 * MiB, "31.51 GiB"},
    };
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        char buf[64];
        size_format_pytorch(fs[i].n, buf, sizeof buf);
        is_str(buf, fs[i].s, "format_size(%llu)", (unsigned long long)fs[i].n);
    }
    /* size parsing for --capacity */
    static const struct {
        const char *s;
        uint64_t v;
    } sizes[] = {{"100MiB", 100 * MiB}, {"31.5GiB", 31 * GiB + GiB / 2}, {"512", 512}, {"2 GB", 2000000000ULL},
                 {"1.5KiB", 1536}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t v = 0;
        struct err se = {0};
        ok(size_parse(sizes[i].s, &v, &se) == 0 && v == sizes[i].v, "size '%s' = %llu", sizes[i].s,
           (unsigned long long)sizes[i].v);
    }
    const char *bad_sizes[] = {"-1GiB", "GiB", "12 parsecs", ""};
    const char *bad_msgs[] = {"size '-1GiB' is negative", "size 'GiB' does not start with a number",
                              "size '12 parsecs' has an unknown unit 'parsecs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)",
                              "empty size"};
    for (int i = 0; i < 4; i++) {
        uint64_t v;
        struct err se = {0};
        ok(size_parse(bad_sizes[i], &v, &se) == -1, "size '%s' rejected", bad_sizes[i]);
        is_str(se.msg, bad_msgs[i], "size error for '%s'", bad_sizes[i]);
    }
    return done_testing();
}
