/* kernels_cuda_table_test.c: the CUDA kernel table (kernels/cuda/kernel_table.cu) against the kernel
 * table: one row per kernel, in the same order (by name), each with its CUDA function, and none past
 * the end. It reads the table without launching anything, so it needs the CUDA build but no GPU;
 * the Makefile defines OOMLAB_CUDA_TABLE and links kernels/cuda's objects when it builds them, and
 * otherwise the test is skipped. */
#include "kernels_test_util.h"

#ifdef OOMLAB_CUDA_TABLE
#include "cuda/kernel_table.h"

int main(void)
{
    for (unsigned i = 0; i < kernel_count(); i++) {
        int has_launcher = 0;
        const char *name = cuda_kernel_row(i, &has_launcher);
        ok(name && strcmp(name, kernel_get(i)->name) == 0, "CUDA row %u is %s (%s)", i, kernel_get(i)->name,
           name ? name : "no row");
        ok(has_launcher, "%s has a CUDA function", kernel_get(i)->name);
    }
    int has_launcher = 0;
    ok(cuda_kernel_row(kernel_count(), &has_launcher) == NULL, "no CUDA row past the last kernel");
    return done_testing();
}
#else
int main(void)
{
    tap_skip_all("the CUDA kernels are not built (CUDA=0, or nvcc not found)");
}
#endif
