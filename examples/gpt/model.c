/* The model's shape and memory: presets, the config check, SPEC.md's
 * parameter layout and init, and the device buffers, all allocated once
 * (one arena and one workspace) before the first step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

#define GPT_PI 3.14159265358979323846

int gpt_preset(const char *name, gpt_config *out) {
    static const struct {
        const char *name;
        gpt_config c;
    } presets[] = {{"tiny", {2, 2, 128, 64, GPT_VOCAB}},
                   {"small", {4, 4, 256, 256, GPT_VOCAB}},
                   {"124m", {12, 12, 768, 1024, GPT_VOCAB}}};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            *out = presets[i].c;
            return 0;
        }
    fprintf(stderr, "gpt-train: unknown preset '%s' (tiny, small or 124m)\n", name);
    return 1;
}

int gpt_config_check(const gpt_config *c, const char *where) {
    if (c->L < 1 || c->H < 1 || c->C < 1 || c->T_max < 1 || c->V != GPT_VOCAB || c->L > 1024 ||
        c->C > 65536 || c->T_max > 1 << 20) {
        fprintf(stderr,
                "gpt-train: %sunsupported config L %d H %d C %d T_max %d V %d (L 1..1024, C "
                "1..65536, T_max 1..2^20, V %d)\n",
                where, c->L, c->H, c->C, c->T_max, c->V, GPT_VOCAB);
        return 1;
    }
    /* the attention kernels' head dims; C = H·D is then a multiple of 64 */
    if (c->C % c->H || (c->C / c->H != 64 && c->C / c->H != 128)) {
        fprintf(stderr,
                "gpt-train: %sunsupported config: head dim C/H = %d/%d is not 64 or 128 (the "
                "attention kernels' head dims)\n",
                where, c->C, c->H);
        return 1;
    }
    return 0;
}

/* ---- Layout ------------------------------------------------------------------ */
/* A tensor after the last; std > 0: a matrix drawn from N(0, std), else a
 * vector of `value`. */
static void add(gpt_layout *lay, const char *name, int l, int64_t rows, int64_t cols, double std,
                float value) {
    gpt_tensor *t = &lay->t[lay->count++];
    if (l >= 0)
        snprintf(t->name, sizeof t->name, "l%d.%s", l, name);
    else
        snprintf(t->name, sizeof t->name, "%s", name);
    t->off = lay->n_params, t->n = (size_t)(rows * cols), t->rows = rows, t->cols = cols;
    t->matrix = std > 0, t->std = std, t->value = value;
    lay->n_params += t->n;
    if (t->matrix) lay->n_matrix = lay->n_params;
}

int gpt_layout_init(gpt_layout *lay, const gpt_config *c) {
    *lay = (gpt_layout){.t = gpt_malloc((size_t)(4 + 12 * c->L) * sizeof(gpt_tensor))};
    if (!lay->t) return 1;
    int64_t C = c->C;
    /* the residual projections are scaled by 1/sqrt(2L), GPT-2's init */
    double std = 0.02, std_res = 0.02 / sqrt(2.0 * c->L);
    add(lay, "wte", -1, c->V, C, std, 0);
    add(lay, "wpe", -1, c->T_max, C, std, 0);
    for (int l = 0; l < c->L; l++) {
        add(lay, "qkv_w", l, 3 * C, C, std, 0);
        add(lay, "proj_w", l, C, C, std_res, 0);
        add(lay, "fc_w", l, 4 * C, C, std, 0);
        add(lay, "fcproj_w", l, C, 4 * C, std_res, 0);
    }
    static const char *vec[8] = {"ln1_w", "ln1_b", "qkv_b", "proj_b",
                                 "ln2_w", "ln2_b", "fc_b",  "fcproj_b"};
    static const int width[8] = {1, 1, 3, 1, 1, 1, 4, 1};
    for (int l = 0; l < c->L; l++)
        for (int i = 0; i < 8; i++) add(lay, vec[i], l, 1, width[i] * C, 0, i % 4 == 0 ? 1.0f : 0);
    add(lay, "lnf_w", -1, 1, C, 0, 1.0f);
    add(lay, "lnf_b", -1, 1, C, 0, 0);
    return 0;
}

void gpt_layout_free(gpt_layout *lay) {
    free(lay->t);
    *lay = (gpt_layout){0};
}

int gpt_tensor_id(const gpt_config *c, int l, gpt_param p) {
    if (p <= GPT_WPE) return (int)p;
    if (p <= GPT_FCPROJ_W) return 2 + 4 * l + (int)(p - GPT_QKV_W);
    if (p <= GPT_FCPROJ_B) return 2 + 4 * c->L + 8 * l + (int)(p - GPT_LN1_W);
    return 2 + 12 * c->L + (int)(p - GPT_LNF_W);
}

/* Box-Muller, one value per call (SPEC.md). */
static double normal(uint64_t *rng) {
    double u1 = gpt_rng_uniform(rng), u2 = gpt_rng_uniform(rng);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * GPT_PI * u2);
}

void gpt_init_params(const gpt_layout *lay, uint64_t seed, float *params) {
    uint64_t rng = seed;
    for (int i = 0; i < lay->count; i++) {
        const gpt_tensor *t = &lay->t[i];
        float *p = params + t->off;
        for (size_t j = 0; j < t->n; j++)
            p[j] = t->matrix ? (float)(t->std * normal(&rng)) : t->value;
    }
}

/* ---- Device buffers ---------------------------------------------------------------- */
/* Carves the arena: a first pass with base NULL sums the sizes. */
typedef struct carver {
    char *base;
    size_t off;
} carver;

static void *take(carver *c, size_t bytes) {
    size_t at = c->off;
    c->off += (bytes + 255) & ~(size_t)255; /* every buffer 256-byte aligned */
    return c->base ? c->base + at : NULL;
}

static void carve(gpt_model *m, carver *cv) {
    size_t rows = (size_t)m->B * (size_t)m->T, C = (size_t)m->cfg.C, n = m->lay.n_params;
    size_t act = rows * C * 2, stat = rows * sizeof(float);
    m->params = take(cv, n * 4), m->grads = take(cv, n * 4);
    m->m = take(cv, n * 4), m->v = take(cv, n * 4), m->params16 = take(cv, n * 2);
    m->tokens = take(cv, rows * 4), m->targets = take(cv, rows * 4);
    for (int l = 0; l < m->cfg.L; l++) {
        gpt_layer_acts *a = &m->layer[l];
        a->r = take(cv, act), a->a = take(cv, act), a->qkv = take(cv, 3 * act);
        a->y = take(cv, act), a->s = take(cv, act), a->m = take(cv, act);
        a->u = take(cv, 4 * act), a->g = take(cv, 4 * act);
        a->lse = take(cv, stat * (size_t)m->cfg.H); /* [B, H, T] */
        a->ln1_mean = take(cv, stat), a->ln1_rstd = take(cv, stat);
        a->ln2_mean = take(cv, stat), a->ln2_rstd = take(cv, stat);
    }
    m->r_out = take(cv, act), m->branch = take(cv, act), m->f = take(cv, act);
    m->lnf_mean = take(cv, stat), m->lnf_rstd = take(cv, stat);
    m->logits = take(cv, rows * (size_t)m->cfg.V * 2);
    m->losses = take(cv, stat), m->scalars = take(cv, 2 * sizeof(float));
    m->d_stream = take(cv, act), m->d_c = take(cv, act);
    m->d_4c = take(cv, 4 * act), m->d_qkv = take(cv, 3 * act);
}

int gpt_model_create(tk_ctx *ctx, const gpt_config *c, int B, int T, gpt_model *m) {
    *m = (gpt_model){.ctx = ctx, .cfg = *c, .B = B, .T = T, .nranks = 1};
    if (gpt_layout_init(&m->lay, c)) return 1;
    if (!(m->layer = gpt_malloc((size_t)c->L * sizeof *m->layer))) return 1;
    carver cv = {0};
    carve(m, &cv);
    tk_status s = tk_gpu_alloc(ctx, cv.off, &m->arena);
    if (s) return gpt_tk_fail(ctx, s, "tk_gpu_alloc (parameters and activations)");
    cv = (carver){.base = m->arena};
    carve(m, &cv);
    return 0;
}

void gpt_model_destroy(gpt_model *m) {
    if (m->ws) tk_gpu_free(m->ctx, m->ws);
    if (m->arena) tk_gpu_free(m->ctx, m->arena);
    gpt_prof_destroy(m->prof);
    free(m->layer);
    gpt_layout_free(&m->lay);
    *m = (gpt_model){0};
}

/* One pass of everything a step and a validation batch run, in mode. */
static int dry_run(gpt_model *m, gpt_mode mode) {
    m->mode = mode;
    int err = gpt_forward(m, m->B, m->T, GPT_FWD_LOSS | GPT_FWD_GRAD) ||
              gpt_backward(m, m->B, m->T) || gpt_optimizer(m, 1, 0.0f) ||
              gpt_forward(m, m->B, m->T, GPT_FWD_LOSS);
    m->mode = GPT_RUN;
    return err;
}

static int prepare_pass(gpt_model *m) { return dry_run(m, GPT_PREPARE); }

int gpt_model_prepare(gpt_model *m) {
    m->ws_need = 256;
    if (dry_run(m, GPT_SIZE)) return 1;
    tk_status s = tk_gpu_alloc(m->ctx, m->ws_need, &m->ws);
    if (s) return gpt_tk_fail(m->ctx, s, "tk_gpu_alloc (workspace)");
    m->ws_bytes = m->ws_need;
    return gpt_prep_pass(m, prepare_pass, m->prep_threads);
}

const uint16_t *gpt_w16(const gpt_model *m, int l, gpt_param p) {
    return m->params16 + m->lay.t[gpt_tensor_id(&m->cfg, l, p)].off;
}

float *gpt_grad(const gpt_model *m, int l, gpt_param p) {
    return m->grads + m->lay.t[gpt_tensor_id(&m->cfg, l, p)].off;
}

int gpt_upload_params(gpt_model *m, const float *host, size_t off, size_t n) {
    enum { CHUNK = 1 << 20 };
    uint16_t *lowp = gpt_malloc(CHUNK * sizeof(uint16_t));
    if (!lowp) return 1;
    tk_status s = tk_gpu_upload(m->ctx, m->params + off, host, n * sizeof(float));
    /* the bf16 copy as tk_adamw writes it: round to nearest even */
    for (size_t i = 0; i < n && !s; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        for (size_t j = 0; j < k; j++) lowp[j] = tk_f32_to_bf16(host[i + j]);
        s = tk_gpu_upload(m->ctx, m->params16 + off + i, lowp, k * sizeof(uint16_t));
    }
    free(lowp);
    return s ? gpt_tk_fail(m->ctx, s, "tk_gpu_upload (parameters)") : 0;
}

int gpt_tk_fail(tk_ctx *ctx, tk_status s, const char *what) {
    fprintf(stderr, "gpt-train: %s: %s: %s\n", what, tk_status_name(s), tk_ctx_error(ctx));
    return 1;
}

void *gpt_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) fprintf(stderr, "gpt-train: out of memory (%zu bytes)\n", bytes);
    return p;
}
