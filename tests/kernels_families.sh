#!/bin/sh
# kernels_families.sh: the CPU and CUDA kernel files mirror each other. Each kernel of
# kernels/kernel_list.def has its CPU function cpu_<name> in kernels/cpu/F.c and its CUDA function
# cuda_<name> in kernels/cuda/F.cu, each defined once, F (its family) the same on both sides.
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/tap.shlib"
cd "$root" || exit 2

names=$(sed -n 's/^KERNEL([A-Z0-9_]*, *\([a-z0-9_]*\),.*/\1/p' kernels/kernel_list.def)
ok $([ "$(echo "$names" | wc -w)" -gt 0 ] && echo 0 || echo 1) "kernel_list.def has rows"
for name in $names; do
    cpu=$(grep -l "^int cpu_$name(\|^CPU_KERNEL(cpu_$name)" kernels/cpu/*.c)
    cuda=$(grep -l "^CUDA_KERNEL(cuda_$name)" kernels/cuda/*.cu)
    good=1
    [ "$(echo "$cpu" | wc -w)" = 1 ] && [ "$(echo "$cuda" | wc -w)" = 1 ] &&
        [ "$(basename "$cpu" .c)" = "$(basename "$cuda" .cu)" ] && good=0
    ok $good "$name: defined in $(echo ${cpu:-no CPU file}) and $(echo ${cuda:-no CUDA file})"
done
done_testing
