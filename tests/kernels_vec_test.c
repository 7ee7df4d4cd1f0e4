/* kernels_vec_test.c: the exp the CPU kernels inline (cpu_vec.h's cpu_exp_nonpos) against exp in double: within
 * 2 ulp over [-87, 0], e^0 = 1, 0 below the normal range and for -inf, NaN kept. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas" /* the header's omp simd loops: this file is not built with them */
#include <math.h>

#include "cpu/cpu_vec.h"
#include "tap.h"

int main(void)
{
    double worst = 0.0;
    float at = 0.0f;
    for (uint32_t i = 0; i <= 4000000; i++) {
        float x = -87.0f * (float)i / 4000000.0f;
        double want = exp((double)x), ulps = fabs(cpu_exp_nonpos(x) - want) / (want * 0x1p-23);
        if (ulps > worst)
            worst = ulps, at = x;
    }
    ok(worst <= 2.0, "4,000,001 points of [-87, 0]: within %.2f ulp of exp (worst at %g)", worst, at);
    ok(cpu_exp_nonpos(0.0f) == 1.0f && cpu_exp_nonpos(-0.0f) == 1.0f, "e^0 = 1");
    ok(cpu_exp_nonpos(-88.0f) == 0.0f && cpu_exp_nonpos(-1e30f) == 0.0f && cpu_exp_nonpos(-INFINITY) == 0.0f,
       "below the normal range, and -inf: 0");
    ok(isnan(cpu_exp_nonpos(NAN)), "NaN stays NaN");
    return done_testing();
}
