/* lora.c: PEFT's LoRA adapters (peft/tuners/lora): where they go (LoraConfig.target_modules, matched
 * against the end of a module's full name, or "all-linear": every linear layer but the output
 * head), their dtype, and their forward (lora/layer.py Linear.forward):
 *     result = base_layer(x); x = _cast_input_dtype(x, lora_A.weight.dtype)
 *     result = result + lora_B(lora_A(dropout(x))) * scaling; result = result.to(torch_result_dtype)
 * lora_dropout is nn.Identity at 0, else nn.Dropout: its output and mask are saved for backward.
 * Adapter dtype: get_peft_model(autocast_adapter_dtype=True) upcasts 16-bit adapters to fp32
 * (tuners_utils.py _cast_adapter_dtype), and on a quantized base _move_adapter_to_device_of_base_layer
 * keeps them in fp32, so `auto` is fp32 there; on a float base it stays the model's dtype, oomlab's
 * earlier convention (lora_dtype: fp32 gives PEFT's default). */
#include "workload/gen.h"
#include "workload/parallel.h"

#include <string.h>

/* PEFT's check_target_module_exists: the module's full name is the target, or ends in "." + target. */
static bool target_matches(const char *module, const char *target)
{
    size_t n = strlen(module), k = strlen(target);
    return !strcmp(module, target) || (n > k && module[n - k - 1] == '.' && !strcmp(module + n - k, target));
}

bool lora_wanted(struct gen *g)
{
    const struct lora_spec *l = &g->spec.lora;
    if (g->spec.trainable != TRAIN_LORA || g->module_id != 0)
        return false;
    if (l->all_linear) /* PEFT's all-linear leaves the output layer out */
        return !g->in_head;
    if (l->ntargets == 0)
        return g->lora != LORA_NONE;
    for (int i = 0; i < l->ntargets; i++) {
        if (target_matches(g->scope, l->targets[i])) {
            g->lora_matched |= 1u << i;
            return true;
        }
    }
    return false;
}

void lora_register(struct gen *g, int64_t in, int64_t out)
{
    int r = g->spec.lora_rank;
    int32_t a = param_add(g, "lora_A.weight", r, in);
    int32_t b = param_add(g, "lora_B.weight", out, r);
    if (a >= 0)
        g->params[a].lora = true;
    if (b >= 0)
        g->params[b].lora = true;
    if (g->spec.lora.dora)
        dora_register(g, out);
}

static enum dtype adapter_dtype(const struct gen *g, enum dtype model_dtype)
{
    if (g->spec.lora.dtype > 0)
        return (enum dtype)(g->spec.lora.dtype - 1);
    return g->spec.quant.type != QUANT_NONE ? DT_F32 : model_dtype;
}

void lora_load(struct gen *g, int32_t first, int32_t count, enum dtype model_dtype)
{
    enum dtype dt = adapter_dtype(g, model_dtype);
    for (int32_t i = first; i < first + count; i++) {
        struct param *p = &g->params[i];
        if (!p->lora)
            continue;
        p->data = t_new2(g, p->dims[0], p->dims[1], dt, CAT_PARAM, p->tag);
        if (g->spec.lora.dora && p->dims[1] == 1) { /* the magnitude, after lora_A and lora_B */
            int32_t pw = i - 3;
            while (pw > first && (g->params[pw].lora || g->params[pw].dims[1] == 1)) /* skip a bias */
                pw--;
            dora_init(g, pw, i - 2, i - 1, i);
            continue;
        }
        float bound = 1.0f / (float)p->dims[1];
        kern_init_uniform(g, p->data, -bound, bound, p->module);
    }
}

/* lora_B(lora_A(dropout(x))) * scaling, x first cast to the adapters' dtype when `cast`. */
static tref adapter_path(struct gen *g, tref x, bool cast)
{
    int32_t pa = param_take(g, "lora_A.weight"), pb = param_take(g, "lora_B.weight");
    enum dtype ad = (enum dtype)g->t[g->params[pa].data].dtype;
    tref xa = cast ? nn_as_dtype(g, "lora_cast", x, ad) : t_ref(g, x);
    tref d = nn_dropout(g, "lora_dropout", xa, g->spec.lora.dropout);
    t_release(g, xa);
    tref h = nn_linear_param(g, g->params[pa].module, d, pa);
    t_release(g, d);
    tref lb = nn_linear_param(g, g->params[pb].module, h, pb);
    t_release(g, h);
    tref s = nn_scale(g, "lora.scaling", lb, g->spec.lora.alpha / (float)g->spec.lora_rank);
    t_release(g, lb);
    return s;
}

static tref to_dtype(struct gen *g, tref x, enum dtype dt)
{
    if (g->t[x].dtype == dt)
        return x;
    tref c = nn_cast(g, "lora", x, dt);
    t_release(g, x);
    return c;
}

/* Two forwards, as PEFT writes them. On a float base (lora/layer.py Linear): x always cast to the
 * adapters' dtype, result + adapter (promoted), then .to(result's dtype). On a quantized base
 * (lora/bnb.py Linear8bitLt and Linear4bit): only outside autocast x cast to the adapters' dtype and
 * the adapter's output back to the result's before result + output; Linear4bit first takes
 * result.clone() ("defensively", for backprop through views; CloneBackward passes the gradient
 * through, modelled as a scale by 1). */
tref lora_forward(struct gen *g, tref x, tref y, int32_t pw, int32_t pb)
{
    if (g->spec.lora.dora)
        return dora_forward(g, x, y, pw, pb);
    bool quantized_base = g->params[pw].quant;
    enum dtype yd = (enum dtype)g->t[y].dtype;
    if (quantized_base && g->spec.quant.type != QUANT_INT8) {
        tref c = nn_scale(g, "clone", y, 1.0f);
        t_release(g, y);
        y = c;
    }
    bool convert = !quantized_base || !g->autocast;
    tref out = adapter_path(g, x, convert);
    if (quantized_base && convert)
        out = to_dtype(g, out, yd);
    tref sum = nn_add(g, "lora", y, out);
    t_release(g, out);
    t_release(g, y);
    return quantized_base ? sum : to_dtype(g, sum, yd);
}

int lora_check_targets(const struct gen *g, struct err *e)
{
    const struct lora_spec *l = &g->spec.lora;
    if (g->spec.trainable != TRAIN_LORA)
        return 0;
    for (int i = 0; i < l->ntargets; i++)
        if (!(g->lora_matched >> i & 1u))
            return err_set(e, ERR_INPUT, "lora_targets: '%s' matches no linear module of the %s model",
                           l->targets[i], family_name(g->spec.model.family));
    return 0;
}

int lora_spec_check(const struct job_spec *s, struct err *e)
{
    const struct lora_spec *l = &s->lora;
    if (s->trainable != TRAIN_LORA)
        return 0;
    if (!(l->dropout >= 0.0f && l->dropout < 1.0f))
        return err_set(e, ERR_INPUT, "lora_dropout: must be in [0, 1) (got %g)", l->dropout);
    if (l->dora && s->quant.type != QUANT_NONE)
        return err_set(e, ERR_INPUT, "use_dora: DoRA on a quantized base (QDoRA) is not modelled yet");
    if (l->dora && l->dropout > 0.0f)
        return err_set(e, ERR_INPUT,
                       "use_dora: DoRA with lora_dropout > 0 (the base layer run again on the dropped-out input) "
                       "is not modelled yet");
    if (l->dora && parallel_shards_params(s))
        return err_set(e, ERR_INPUT, "use_dora: DoRA with sharded parameters (FSDP, ZeRO-3) is not modelled yet");
    if (l->dora && s->autocast)
        return err_set(e, ERR_INPUT, "use_dora: DoRA under autocast is not modelled yet");
    if (l->all_linear && l->ntargets > 0)
        return err_set(e, ERR_INPUT, "lora_targets: all-linear cannot be combined with module names");
    return 0;
}
