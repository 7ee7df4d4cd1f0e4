/* workload_seq_classification_test.c: the encoder's sequence-classification head (model.num_labels):
 * BertForSequenceClassification with the pooler, RobertaForSequenceClassification without, their
 * published parameter counts; a linear probe trains the head only; one label (regression) is refused. */
#include <string.h>

#include "workload_step.h"

/* bert-base-uncased / roberta-base dimensions as the encoder family */
static void base(struct model_spec *m, bool roberta, int labels)
{
    memset(m, 0, sizeof *m);
    m->family = FAMILY_ENCODER;
    m->layers = 12;
    m->hidden = 768;
    m->heads = 12;
    m->ffn = 3072;
    m->vocab = roberta ? 50265 : 30522;
    m->max_positions = roberta ? 514 : 512;
    m->type_vocab = roberta ? 1 : 2;
    m->norm_bias = m->bias = true;
    m->norm_place = NORM_POST;
    m->pooler = !roberta; /* RobertaForSequenceClassification: add_pooling_layer=False */
    m->dropout = 0.1f;
    m->num_labels = labels;
}

static void test_counts(void)
{
    struct model_spec m;
    struct err e = {0};
    base(&m, false, 0);
    is_int(model_param_count(&m, &e), 109482240LL, "bert-base-uncased BertModel: 109,482,240");
    base(&m, false, 2);
    is_int(model_param_count(&m, &e), 109483778LL, "BertForSequenceClassification, 2 labels: 109,483,778");
    base(&m, true, 2);
    is_int(model_param_count(&m, &e), 124647170LL,
           "roberta-base RobertaForSequenceClassification, 2 labels: 124,647,170 (dense 768x768 + out_proj)");
    base(&m, true, 1);
    e = (struct err){0};
    ok(model_spec_resolve(&m, NULL, &e) < 0 && strstr(e.msg, "model.num_labels 1 is regression"),
       "one label is regression, refused: %s", e.msg);
}

/* Two AdamW steps of a 2-layer model at batch 4. */
static void test_step(bool roberta, enum trainable_kind trainable, int64_t trained, const char *what)
{
    struct job_spec s;
    job_spec_init(&s);
    s.model.preset[0] = 0;
    base(&s.model, roberta, 3);
    s.model.layers = 2;
    s.batch = 4;
    s.seq_len = 64;
    s.steps = 2;
    s.trainable = trainable;
    check_adamw_steps(&s, trained, what);
}

int main(void)
{
    test_counts();
    test_step(false, TRAIN_LINEAR_PROBE, 768 * 3 + 3, "BERT linear probe: the classifier only, not the pooler");
    test_step(true, TRAIN_LINEAR_PROBE, 768 * 768 + 768 + 768 * 3 + 3, "RoBERTa linear probe: the classification head");
    struct model_spec m;
    base(&m, true, 3);
    m.layers = 2;
    test_step(true, TRAIN_FULL, model_param_count(&m, &(struct err){0}), "RoBERTa full fine-tuning");
    return done_testing();
}
