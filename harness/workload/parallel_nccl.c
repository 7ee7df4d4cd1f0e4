/* parallel_nccl.c: the device memory NCCL allocates for itself when one rank's communicator connects its
 * ring (outside PyTorch's caching allocator, so never part of its allocated or reserved figures).
 *
 * NVIDIA/nccl src/init.cc computeBuffSizes: a buffer per protocol and connection, LL of
 * NCCL_LL_LINES_PER_THREAD x NCCL_LL_MAX_NTHREADS x NCCL_STEPS x sizeof(union ncclLLFifoLine) =
 * 8 x 512 x 8 x 16 = 524,288 B, LL128 of NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS x
 * NCCL_STEPS x 8 = 120 x 640 x 8 x 8 = 4,915,200 B (src/include/device.h), Simple of NCCL_BUFFSIZE (4 MiB;
 * docs/env.rst). src/transport/p2p.cc p2pRecvSetup / p2pSendSetup: a receive connection holds its
 * ncclRecvMem (4,096 B, MEM_ALIGN) and the three buffers, a send connection its ncclSendMem (4,096 B),
 * each rounded up to CUDA_IPC_MIN (2 MiB); with P2P read (NVLink between Ampere or newer GPUs) the Simple
 * buffer sits on the send side instead, which at the default sizes is the same 12 MiB. A rank of the ring
 * has one receive connection (from the previous rank) and one send connection (to the next) per channel.
 * src/transport/shm.cc (GPUs without peer access, such as GeForce cards over PCIe) keeps these buffers in
 * host shared memory (ncclShmOpen): none on the device.
 *
 * Not modelled: tree and NVLS connections (set up when an algorithm needs them), the communicator's
 * device structures and work FIFO, and more than one communicator per process.
 */
#include "workload/parallel.h"

#define MIB (1024LL * 1024)
#define NCCL_LL_BUFF (8LL * 512 * 8 * 16)
#define NCCL_LL128_BUFF (120LL * 640 * 8 * 8)
#define NCCL_CONN_MEM 4096LL /* sizeof(struct ncclRecvMem), sizeof(struct ncclSendMem) */
#define CUDA_IPC_MIN (2 * MIB)

static int64_t ipc_align(int64_t n)
{
    return (n + CUDA_IPC_MIN - 1) / CUDA_IPC_MIN * CUDA_IPC_MIN;
}

struct nccl_conn nccl_connections(const struct parallel_spec *p)
{
    struct nccl_conn c = {0};
    if (p->strategy == PAR_NONE || p->world_size < 2 || p->nccl_transport != NCCL_P2P)
        return c;
    c.recv = ipc_align(NCCL_CONN_MEM + NCCL_LL_BUFF + NCCL_LL128_BUFF + (int64_t)p->nccl_buffsize);
    c.send = ipc_align(NCCL_CONN_MEM);
    c.total = p->nccl_channels * (c.recv + c.send);
    return c;
}
