/* conv_blocks.h: diffusers building blocks shared by the UNet and the VAE. Internal. */
#ifndef OOMLAB_WORKLOAD_CONV_BLOCKS_H
#define OOMLAB_WORKLOAD_CONV_BLOCKS_H

#include "workload/models/models.h"

/* ResnetBlock2D: GN, SiLU, conv3x3, (+ time embedding projection), GN, SiLU, dropout, conv3x3,
 * 1x1 shortcut when channels change, residual add. temb TNONE and temb_dim 0: no time input. */
tref conv_resnet(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, tref temb, int64_t temb_dim,
                 int64_t groups);
/* Transformer2DModel: GN, proj_in, `depth` BasicTransformerBlocks (self-attn, cross-attn, GEGLU FF),
 * proj_out, residual. */
tref conv_transformer(struct gen *g, const char *name, tref x, int64_t c, int64_t heads, int depth, tref context,
                      int64_t context_dim, int64_t groups, bool eager);
/* The VAE mid-block single-head self-attention (GroupNorm, to_q/k/v/out with biases, residual). */
tref conv_vae_attention(struct gen *g, const char *name, tref x, int64_t c, int64_t groups, bool eager);

#endif
