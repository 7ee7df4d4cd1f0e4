/* dnnl_lib_test.c: without oneDNN a convolution fails with an internal error naming the library it tried
 * ($OOMLAB_DNNL here) and why, and writes nothing; the other CPU kernels run as before. */
#include <stdlib.h>

#include "kernels_test_util.h"

int main(void)
{
    setenv("OOMLAB_DNNL", "/nonexistent/libdnnl.so.2", 1);
    struct kernel_call k = KCALL(K_CONV2D_FWD, DT_F32, 1, 2, 4, 4, 3, 3, 1, 1);
    float x[32], w[54], y[48];
    for (int i = 0; i < 32; i++)
        x[i] = 1.0f;
    for (int i = 0; i < 54; i++)
        w[i] = 1.0f;
    for (int i = 0; i < 48; i++)
        y[i] = -7.0f;
    struct err e = {0};
    is_int(kernel_run_cpu(&k, (void *[]){x, w, y}, &e), -1, "conv2d_fwd without oneDNN fails");
    is_int(e.code, ERR_INTERNAL, "as an internal error (exit 3)");
    ok(strstr(e.msg, "cannot load oneDNN for convolutions: /nonexistent/libdnnl.so.2") != NULL,
       "naming the library it tried (%s)", e.msg);
    int untouched = 1;
    for (int i = 0; i < 48; i++)
        untouched &= y[i] == -7.0f;
    ok(untouched, "and leaving the output as it was");
    is_int(kernel_run_cpu(&k, (void *[]){x, w, y}, &e), -1, "a second call gives the first one's answer");
    struct kernel_call g = KCALL(K_GELU_FWD, DT_F32, 48, 0);
    e = (struct err){0};
    is_int(kernel_run_cpu(&g, (void *[]){y, y}, &e), 0, "a kernel without oneDNN still runs");
    return done_testing();
}
