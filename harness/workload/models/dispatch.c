/* dispatch.c: model_forward, the one entry from the generator to the family files. */
#include "workload/models/models.h"

tref model_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    switch (m->family) {
    case FAMILY_DECODER:
        return decoder_forward(g, m, bt, loss);
    case FAMILY_ENCODER:
        return encoder_forward(g, m, bt, loss);
    case FAMILY_T5:
        return t5_forward(g, m, bt, loss);
    case FAMILY_UNET:
        return unet_forward(g, m, bt, loss);
    case FAMILY_VAE:
        return vae_forward(g, m, bt, loss);
    case FAMILY_CLIP_TEXT:
        return clip_text_forward(g, m, bt, loss);
    case FAMILY_MLP:
        return mlp_forward(g, m, bt, loss);
    case FAMILY_CNN:
        return cnn_forward(g, m, bt, loss);
    case FAMILY_COUNT:
        break;
    }
    return TNONE;
}
