/* device_open_test.c: --capacity as a size or a share of the device (capacity_parse with worked
 * values and every malformed kind), and device_open resolving it: a sim profile keeps its CUDA
 * context under a share and drops it under a size, a bare sim:SIZE has its architecture's context,
 * host shares are of the machine's memory (the spec's own size or share unless --capacity is given),
 * and bad specs are input errors. (The device-kind table itself: device_kind_test.c.) */
#include "device/device_kind.h"
#include "device/host.h"
#include "tap.h"

static struct capacity parsed(const char *s)
{
    struct capacity c = {0, 0.0};
    struct err e = {0};
    ok(capacity_parse(s, &c, &e) == 0, "capacity '%s' parses%s%s", s, e.msg[0] ? ": " : "", e.msg);
    return c;
}

static void parse_cases(void)
{
    struct capacity c = parsed("24GiB");
    ok(c.bytes == 24ULL << 30 && c.fraction == 0.0, "24GiB is 25769803776 bytes");
    c = parsed("512B");
    ok(c.bytes == 512 && c.fraction == 0.0, "512B is 512 bytes: bytes take their unit");
    c = parsed("0.5");
    ok(c.bytes == 0 && c.fraction == 0.5, "0.5 is half the device");
    c = parsed("50%");
    ok(c.bytes == 0 && c.fraction == 0.5, "50%% is half the device");
    c = parsed("1");
    ok(c.fraction == 1.0, "1 is the whole device, not one byte");
    c = parsed("12.5%");
    ok(c.fraction == 0.125, "12.5%% is an eighth");
    static const struct {
        const char *s, *msg;
    } bad[] = {
        {"0", "capacity '0' is zero"},
        {"0GiB", "capacity '0GiB' is zero"},
        {"1.5", "capacity '1.5': a bare number is a share in (0, 1]; give a size with its unit (1.5GiB, 1.5MiB) or a "
                "percentage (1.5%)"},
        {"24", "capacity '24': a bare number is a share in (0, 1]; give a size with its unit (24GiB, 24MiB) or a "
               "percentage (24%)"},
        {"150%", "capacity '150%' is not a percentage in (0, 100]"},
        {"0%", "capacity '0%' is not a percentage in (0, 100]"},
        {"-5%", "capacity '-5%' is not a percentage in (0, 100]"},
        {"half%", "capacity 'half%' is not a percentage in (0, 100]"},
        {"12 parsecs", "size '12 parsecs' has an unknown unit 'parsecs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"},
        {"", "empty size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct capacity b;
        struct err e = {0};
        ok(capacity_parse(bad[i].s, &b, &e) == -1 && e.code == ERR_INPUT, "capacity '%s' rejected", bad[i].s);
        is_str(e.msg, bad[i].msg, "and says why");
    }
    uint64_t r = 0;
    struct err e = {0};
    capacity_resolve((struct capacity){0, 0.25}, 8ULL << 30, 1, &r, &e);
    is_u64(r, 2ULL << 30, "a quarter of 8 GiB is 2 GiB");
    capacity_resolve((struct capacity){3, 0.0}, 8ULL << 30, 1, &r, &e);
    is_u64(r, 3, "a size is itself");
    capacity_resolve((struct capacity){0, 0.0}, 8ULL << 30, 7, &r, &e);
    is_u64(r, 7, "neither: the default");
}

/* Opens spec under cap, checks its total (and free, on sim), closes it. */
static void open_case(const char *spec, struct capacity cap, uint64_t total, const char *what)
{
    struct err e = {0};
    struct device *d = device_open(spec, &(struct device_open_options){.capacity = cap}, &e);
    ok(d != NULL, "%s opens%s%s", spec, e.msg[0] ? ": " : "", e.msg);
    if (!d)
        return;
    is_u64(d->total, total, "%s: %s", spec, what);
    d->ops->destroy(d);
}

static void open_cases(void)
{
    const struct gpu_profile *p = gpu_profile_find("rtx5090");
    open_case("sim:rtx5090", (struct capacity){0, 0.0}, p->total_bytes, "the profile's total");
    open_case("sim:rtx5090", (struct capacity){0, 0.5}, (uint64_t)((double)p->total_bytes * 0.5),
              "--capacity 50%: half the profile's total");
    open_case("sim:24GiB", (struct capacity){0, 0.25}, 6ULL << 30, "--capacity 0.25 of a 24 GiB sim: 6 GiB");
    open_case("sim:rtx5090", (struct capacity){1ULL << 30, 0.0}, 1ULL << 30, "--capacity 1GiB");

    struct err e = {0};
    struct device *half = device_open("sim:rtx5090", &(struct device_open_options){.capacity = {0, 0.5}}, &e);
    struct device *sized =
        device_open("sim:rtx5090", &(struct device_open_options){.capacity = {p->total_bytes / 2, 0.0}}, &e);
    struct device *bare = device_open("sim:24GiB", NULL, &e);
    if (half && sized && bare) {
        uint64_t f1, t1, f2, t2, f3, t3;
        half->ops->mem_info(half, &f1, &t1);
        sized->ops->mem_info(sized, &f2, &t2);
        bare->ops->mem_info(bare, &f3, &t3);
        is_u64(t1 - f1, p->context_bytes, "a share of a profile keeps its CUDA context (%llu bytes in use)",
               (unsigned long long)p->context_bytes);
        is_u64(t2 - f2, 0, "a --capacity size has none");
        is_u64(t3, 24ULL << 30, "sim:24GiB reports 24 GiB total");
        is_u64(t3 - f3, gpu_profile_default()->context_bytes, "and the default profile's CUDA context is taken from it");
        is_str(half->name, "sim:rtx5090@50%", "the share is in the device's name");
    } else {
        ok(0, "sim devices for the context check open: %s", e.msg);
    }
    if (half)
        half->ops->destroy(half);
    if (sized)
        sized->ops->destroy(sized);
    if (bare)
        bare->ops->destroy(bare);

    const uint64_t memory = host_memory_bytes(NULL);
    open_case("host", (struct capacity){0, 0.0}, memory / 2, "by default half the host's memory");
    open_case("host:25%", (struct capacity){0, 0.0}, (uint64_t)((double)memory * 0.25), "host:25% of its memory");
    open_case("host:2GiB", (struct capacity){0, 0.0}, 2ULL << 30, "host:2GiB");
    open_case("host:2GiB", (struct capacity){0, 0.125}, (uint64_t)((double)memory * 0.125),
              "--capacity 0.125 wins over the spec's size");

    static const char *bad[] = {"host:0", "host:150%", "sim:nosuch", "tpu", "cuda:x", "sim:400MiB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct err be = {0};
        struct device *d = device_open(bad[i], NULL, &be);
        ok(!d && be.code == ERR_INPUT, "device '%s' is an input error: %s", bad[i], be.msg);
        if (d)
            d->ops->destroy(d);
    }
}

int main(void)
{
    parse_cases();
    open_cases();
    return done_testing();
}
