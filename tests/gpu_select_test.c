/* gpu_select_test.c: choosing a GPU without one, through the NVML stand-in (tests/standin/): NVML's
 * GPUs read with their memory, processes, modes and telemetry; cuda:auto's choice (most free memory, --min-free, MIG, compute modes,
 * CUDA_VISIBLE_DEVICES by index and UUID), its wait for a GPU that frees up while it polls, and its
 * message when none does; the profile a detected GPU's name maps to; durations as options take them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/gpu_select.h"
#include "device/profile_detect.h"
#include "tap.h"
#include "util/duration.h"

static char config[256];

static void write_config(const char *text)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", config);
    FILE *f = fopen(tmp, "w");
    fputs(text, f);
    fclose(f);
    rename(tmp, config); /* the stand-in reads it while the waiter polls: never half-written */
}

#define TWO_GPUS                                                                                               \
    "# two cards, the second one busier\n"                                                                     \
    "name=NVIDIA GeForce RTX 4090;uuid=GPU-aaaa-1111;total=25757220864;used=1073741824;procs=11:536870912,"   \
    "%d:1048576;mig=0;mode=0;temp=45;power=120000;sm=2520;mem=10501;reasons=5;ecc=1:2\n"                       \
    "name=NVIDIA GeForce RTX 5090;uuid=GPU-bbbb-2222;total=34190917632;used=25769803776;procs=12:25769803776;" \
    "mig=0;mode=0\n"

static void test_list(void)
{
    char text[1024];
    snprintf(text, sizeof text, TWO_GPUS, (int)getpid());
    write_config(text);
    struct nvml_gpu g[NVML_MAX_GPUS];
    int n = 0;
    struct err e = {0};
    ok(nvml_list(g, NVML_MAX_GPUS, &n, &e) == 0, "NVML (the stand-in) lists the GPUs %s", e.msg);
    is_int(n, 2, "two GPUs");
    is_str(g[0].name, "NVIDIA GeForce RTX 4090", "GPU 0's name");
    is_str(g[1].uuid, "GPU-bbbb-2222", "GPU 1's UUID");
    is_u64(g[0].total, 25757220864ULL, "total memory");
    is_u64(g[0].free, 25757220864ULL - 1073741824ULL, "free = total - used");
    is_int((int)g[0].others, 1, "one other process: this one's is not counted");
    is_int((int)g[0].others_used, 536870912, "and its memory");
    ok(g[0].temperature_c == 45 && g[0].power_mw == 120000 && g[0].sm_mhz == 2520 && g[0].mem_mhz == 10501,
       "telemetry: 45 C, 120 W, SM 2520 MHz, memory 10501 MHz");
    ok(g[0].ecc_corrected == 1 && g[0].ecc_uncorrected == 2, "ECC: 1 corrected, 2 uncorrected");
    ok(g[1].temperature_c == NVML_UNKNOWN && g[1].clock_event_reasons == NVML_UNKNOWN,
       "what a GPU does not report is unknown, not zero");
    char r[160];
    nvml_reasons_format(g[0].clock_event_reasons, r, sizeof r);
    is_str(r, "gpu idle, sw power cap", "clock-event bits 0x5 in words");
    nvml_reasons_format(0, r, sizeof r);
    is_str(r, "none", "no reason");
    ok(gpu_profile_for(&g[0]) == gpu_profile_find("rtx4090"), "an RTX 4090 is the rtx4090 profile");
    struct nvml_gpu l40s = {.name = "NVIDIA L40S", .total = 48305799168ULL};
    struct nvml_gpu a100 = {.name = "NVIDIA A100-SXM4-80GB", .total = 85899345920ULL};
    struct nvml_gpu t4 = {.name = "Tesla T4", .total = 16106127360ULL};
    struct nvml_gpu odd = {.name = "NVIDIA GeForce GTX 1080", .total = 8589934592ULL};
    ok(gpu_profile_for(&l40s) == gpu_profile_find("l40s"), "an L40S is l40s, not l4");
    ok(gpu_profile_for(&a100) == gpu_profile_find("a100-80"), "an 80 GB A100 is a100-80, by its memory");
    ok(gpu_profile_for(&t4) == gpu_profile_find("t4"), "a Tesla T4 is t4");
    ok(gpu_profile_for(&odd) == NULL, "a GTX 1080 matches no profile");
}

static void test_pick(void)
{
    struct nvml_gpu g[4] = {
        {.index = 0, .name = "a", .free = 10ULL << 30, .compute_mode = 0, .mig = 0},
        {.index = 1, .name = "b", .free = 20ULL << 30, .compute_mode = 0, .mig = 1},
        {.index = 2, .name = "c", .free = 16ULL << 30, .compute_mode = NVML_MODE_EXCLUSIVE_PROCESS, .others = 1},
        {.index = 3, .name = "d", .free = 12ULL << 30, .compute_mode = NVML_MODE_PROHIBITED},
    };
    bool all[4] = {true, true, true, true};
    char why[1024];
    is_int(gpu_pick(g, 4, all, 0, why, sizeof why), 0,
           "the MIG, held exclusive-process and prohibited GPUs are skipped: GPU 0 with 10 GiB");
    ok(strstr(why, "GPU 1 (b): MIG enabled") && strstr(why, "GPU 2 (c): exclusive-process mode, held") &&
           strstr(why, "GPU 3 (d): compute mode prohibited"),
       "each skipped GPU says why");
    g[1].mig = 0;
    is_int(gpu_pick(g, 4, all, 0, why, sizeof why), 1, "MIG off: GPU 1 has the most free memory");
    bool not1[4] = {true, false, true, true};
    is_int(gpu_pick(g, 4, not1, 0, why, sizeof why), 0, "hidden from this process: GPU 0 again");
    is_int(gpu_pick(g, 4, all, 21ULL << 30, why, sizeof why), -1, "none has 21 GiB free");
    ok(strstr(why, "GPU 0 (a): 10.00 GiB free, below the 21.00 GiB asked for"), "and the message says so");
    g[0].free = g[1].free;
    is_int(gpu_pick(g, 4, all, 0, why, sizeof why), 0, "a tie goes to the lower index");
    is_int(gpu_pick(g, 0, all, 0, why, sizeof why), -1, "no GPU at all");
    is_str(why, "NVML sees no GPU\n", "is said");
}

static void test_visible(void)
{
    struct nvml_gpu g[3] = {{.index = 0, .uuid = "GPU-aaaa"}, {.index = 1, .uuid = "GPU-bbbb"}, {.index = 2, .uuid = "GPU-abcd"}};
    int ord[3];
    struct err e = {0};
    gpu_visible(g, 3, NULL, ord, &e);
    ok(ord[0] == 0 && ord[1] == 1 && ord[2] == 2, "no CUDA_VISIBLE_DEVICES: ordinal = NVML index");
    gpu_visible(g, 3, "2,0", ord, &e);
    ok(ord[0] == 1 && ord[1] == -1 && ord[2] == 0, "2,0: NVML GPU 2 is cuda:0, GPU 0 is cuda:1, GPU 1 hidden");
    gpu_visible(g, 3, "GPU-bb,7,0", ord, &e);
    ok(ord[1] == 0 && ord[0] == -1 && ord[2] == -1, "a UUID prefix; CUDA stops at the unknown 7");
    gpu_visible(g, 3, "GPU-a", ord, &e);
    ok(ord[0] == -1 && ord[2] == -1, "an ambiguous prefix shows nothing");
    gpu_visible(g, 3, "", ord, &e);
    ok(ord[0] == -1 && ord[1] == -1 && ord[2] == -1, "empty: no GPU visible");
    e = (struct err){0};
    ok(gpu_visible(g, 3, "MIG-1234", ord, &e) < 0 && strstr(e.msg, "MIG"), "a MIG device is refused: %s", e.msg);
}

static void *free_gpu_later(void *arg)
{
    usleep(150 * 1000);
    write_config("name=NVIDIA GeForce RTX 5090;uuid=GPU-bbbb-2222;total=34190917632;used=1073741824\n");
    return NULL;
}

static void test_auto(void)
{
    write_config("name=NVIDIA GeForce RTX 5090;uuid=GPU-bbbb-2222;total=34190917632;used=30000000000\n");
    struct err e = {0};
    int ord = -7;
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("CUDA_DEVICE_ORDER");
    gpu_select_configure(&(struct gpu_select_options){.min_free = 8ULL << 30});
    ok(gpu_select_auto(&ord, NULL, &e) < 0 && strstr(e.msg, "no usable GPU (--wait-for-gpu waits for one)") &&
           strstr(e.msg, "GPU 0 (NVIDIA GeForce RTX 5090): 3.90 GiB free, below the 8.00 GiB asked for"),
       "8 GiB asked, 3.90 GiB free, no wait");
    is_str(getenv("CUDA_DEVICE_ORDER"), "PCI_BUS_ID", "CUDA told to number GPUs as NVML does");

    gpu_select_configure(&(struct gpu_select_options){.min_free = 8ULL << 30, .wait_seconds = 0.12, .poll_seconds = 0.03});
    e = (struct err){0};
    ok(gpu_select_auto(&ord, NULL, &e) < 0 && strstr(e.msg, "no usable GPU after waiting"), "waiting 120 ms in vain");

    pthread_t t;
    pthread_create(&t, NULL, free_gpu_later, NULL);
    FILE *progress = tmpfile();
    gpu_select_configure(&(struct gpu_select_options){.min_free = 8ULL << 30, .wait_seconds = 5, .poll_seconds = 0.02});
    e = (struct err){0};
    ok(gpu_select_auto(&ord, progress, &e) == 0 && ord == 0, "the GPU frees up while it waits: cuda:0 %s", e.msg);
    pthread_join(t, NULL);
    char line[512] = "";
    rewind(progress);
    ok(fgets(line, sizeof line, progress) && strstr(line, "oomlab: waiting for a GPU (0 s of 5 s): GPU 0"),
       "each poll says what it waits for: %s", line);
    fclose(progress);

    write_config("name=X;uuid=GPU-x;total=100;used=100\n");
    ok(gpu_select_auto(&ord, NULL, &e) == 0 && ord == 0, "the choice is made once per process");

    char text[1024];
    snprintf(text, sizeof text, TWO_GPUS, (int)getpid());
    write_config(text);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa", 1);
    gpu_select_configure(&(struct gpu_select_options){0});
    ok(gpu_select_auto(&ord, NULL, &e) == 0 && ord == 1,
       "CUDA_VISIBLE_DEVICES reorders: the 4090 (most free) is cuda:1 %s", e.msg);
    setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST", 1);
    gpu_select_configure(&(struct gpu_select_options){0});
    ok(gpu_select_auto(&ord, NULL, &e) < 0 && strstr(e.msg, "CUDA_DEVICE_ORDER=FASTEST_FIRST"),
       "FASTEST_FIRST numbers GPUs differently: refused");
    unsetenv("CUDA_DEVICE_ORDER");
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_durations(void)
{
    double s = 0;
    struct err e = {0};
#define FRESH (e = (struct err){0}, &e)
    ok(duration_parse("500ms", &s, &e) == 0 && s == 0.5, "500ms");
    ok(duration_parse("1.5h", &s, &e) == 0 && s == 5400, "1.5h");
    ok(duration_parse("10m", &s, &e) == 0 && s == 600, "10m");
    ok(duration_parse("10", &s, FRESH) < 0 && strstr(e.msg, "needs a unit"), "a bare number");
    ok(duration_parse("s", &s, FRESH) < 0 && strstr(e.msg, "is not a duration"), "no number");
    ok(duration_parse("-1s", &s, FRESH) < 0, "negative");
    ok(duration_parse("8d", &s, FRESH) < 0, "an unknown unit");
    ok(duration_parse("200h", &s, FRESH) < 0 && strstr(e.msg, "longer than a week"), "over a week");
}

int main(void)
{
    const char *dir = getenv("OOMLAB_STANDINS");
    char lib[512];
    snprintf(lib, sizeof lib, "%s/libnvml-standin.so", dir ? dir : "build/tests");
    if (access(lib, R_OK)) {
        printf("1..0 # SKIP the NVML stand-in %s is not built (make tests)\n", lib);
        return 0;
    }
    test_durations();
    test_pick();
    test_visible();
    /* NVML loads once per process: the stand-in here; no library and a failing driver in cli_devices_nvml.sh */
    setenv("OOMLAB_NVML", lib, 1);
    snprintf(config, sizeof config, "/tmp/oomlab-nvml-%d.conf", (int)getpid());
    setenv("OOMLAB_NVML_STANDIN", config, 1);
    test_list();
    test_auto();
    unlink(config);
    return done_testing();
}
