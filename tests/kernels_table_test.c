/* kernels_table_test.c: the kernel table itself: every entry complete (a CPU function included),
 * its row consistent (names, dims, tensors, roles, dtypes), names unique and found by name, tensor
 * sizes and byte counts consistent, bad calls rejected with a message. */
#include "kernels_test_util.h"

/* What a row of kernel_list.def must satisfy beyond having every field: a lower-case identifier as
 * its name, dim names without gaps and the positive-dims mask within them, exactly ntensors tensor
 * names, known roles with at least one output, known dtypes. Returns the first problem, or NULL. */
static const char *row_problem(const struct kernel_desc *kd)
{
    for (const char *c = kd->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return "name is not a lower-case identifier";
    unsigned ndims = 0;
    while (ndims < KERNEL_MAX_DIMS && kd->dim_names[ndims])
        ndims++;
    for (unsigned i = ndims; i < KERNEL_MAX_DIMS; i++)
        if (kd->dim_names[i])
            return "a dim name follows an unnamed dim";
    if (kd->positive_dims >> ndims)
        return "positive_dims names a dim beyond the named ones";
    int writes = 0;
    for (unsigned i = 0; i < KERNEL_MAX_TENSORS; i++) {
        if ((i < kd->ntensors) != (kd->tensor_names[i] != NULL))
            return "tensor names do not number ntensors";
        if (i >= kd->ntensors)
            continue;
        if (kd->roles[i] > TR_INOUT)
            return "unknown tensor role";
        writes |= kd->roles[i] != TR_IN;
        if (kd->dtypes[i] >= DT_COUNT && kd->dtypes[i] != TD_CALL && kd->dtypes[i] != TD_DIMS1)
            return "unknown tensor dtype";
    }
    return writes ? NULL : "no tensor is written";
}

int main(void)
{
    is_int(kernel_count(), K_COUNT, "kernel_count");
    ok(kernel_get(K_COUNT) == NULL, "kernel_get past the end is NULL");
    for (unsigned i = 0; i < kernel_count(); i++) {
        const struct kernel_desc *kd = kernel_get(i);
        int complete = kd->name && kd->summary && kd->elems && kd->flops && kd->bytes && kd->run_cpu &&
                       kd->ntensors >= 1 && kd->ntensors <= KERNEL_MAX_TENSORS && kd->dim_names[0];
        for (unsigned j = 0; j < kd->ntensors; j++)
            complete &= kd->tensor_names[j] != NULL;
        if (!ok(complete, "%s: entry complete, with a CPU function", kd->name ? kd->name : "(null)"))
            continue;
        const char *problem = row_problem(kd);
        ok(problem == NULL, "%s: row consistent%s%s", kd->name, problem ? ": " : "", problem ? problem : "");
        is_int(kernel_from_name(kd->name), i, "%s found by name", kd->name);
    }
    is_int(kernel_from_name("no_such_kernel"), -1, "unknown name gives -1");

    /* a packed qkv passed twice counts once in bytes */
    struct kernel_call k = KCALL(K_FLASH_FWD, DT_BF16, 2, 4, 16, 16, 8, 1, 0, 1);
    k.tensors[1] = k.tensors[0];
    const struct kernel_desc *f = kernel_get(K_FLASH_FWD);
    double qkv = 2.0 * 16 * (4 + 8) * 8 * 2, o = 2.0 * 16 * 4 * 8 * 2, lse = 2.0 * 4 * 16 * 4;
    ok(f->bytes(&k) == qkv + o + lse, "flash_fwd packed bytes = qkv + o + lse (%g)", f->bytes(&k));
    ok(f->flops(&k) < kernel_get(K_ATTN_FWD)->flops(&k), "causal fused attention counts fewer flops than unfused");

    struct err e = {0};
    k.tensors[1] = 99;
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "packed"), "packed qkv given as two tensors rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_ATTN_FWD, DT_F32, 1, 6, 4, 4, 8, 0, 4);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "heads"), "6 heads over 4 kv heads rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_CONV2D_FWD, DT_F32, 1, 3, 2, 2, 4, 5, 1, 0);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "no output"), "filter larger than input rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_GROUPNORM_FWD, DT_F32, 1, 10, 4, 3);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "groups"), "10 channels in 3 groups rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_CAST, DT_F32, 4, DT_I64);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "destination"), "cast to i64 rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_DROPOUT_FWD, DT_F32, 4, 1);
    k.fparam[0] = 1.0f;
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "p = 1"), "dropout p = 1 rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_ADAMW8, DT_F32, 4096, 1, 0, 2048);
    ok(kernel_validate(&k, &e) == 0, "adamw8 call valid");
    is_u64(kernel_tensor_bytes(&k, 4), 2 * 4, "adamw8 m_absmax: 2 blocks of fp32");
    is_u64(kernel_tensor_bytes(&k, 2), 4096, "adamw8 m codes: 1 byte each");
    k = KCALL(K_CAST, DT_F32, 10, DT_BF16);
    is_u64(kernel_tensor_bytes(&k, 1), 20, "cast output takes dims[1]'s dtype");
    void *t[2] = {NULL, NULL};
    memset(&e, 0, sizeof e);
    ok(kernel_run_cpu(&k, t, &e) < 0 && strstr(e.msg, "no memory"), "NULL tensor rejected: %s", e.msg);
    return done_testing();
}
