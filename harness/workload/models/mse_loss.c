/* mse_loss.c: the mean squared error the diffusion families train on (the UNet's noise prediction, the
 * VAE's reconstruction, the MMDiT's flow-matching target), as F.mse_loss(reduction="mean") composes it
 * here: the difference, its square and the mean, each a tensor. */
#include "workload/models/models.h"

tref mse_loss(struct gen *g, tref pred, tref target)
{
    tref diff = nn_sub(g, "loss.diff", pred, target);
    t_release(g, pred);
    t_release(g, target);
    tref sq = nn_mul(g, "loss.square", diff, diff);
    t_release(g, diff);
    int64_t one[1] = {1}, all[3] = {1, g->mode == GEN_RUN ? t_numel(g, sq) : 1, 1};
    tref l = nn_mean(g, "loss", sq, all, one, 1);
    t_release(g, sq);
    return l;
}
