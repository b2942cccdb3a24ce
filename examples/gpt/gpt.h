/* gpt-train: a GPT-2 trainer whose every kernel comes from TileKittens
 * (examples/gpt/README.md; the model, data, optimizer and file formats are
 * SPEC.md's). What the files share: the config and the parameter layout, the
 * model (device buffers and the kernel calls' modes), the data, the
 * checkpoint and the float64 check.
 *
 * Every function that can fail returns 0 or 1 (after printing one message
 * on stderr: "gpt-train: ..."; for a tk_* call its status and
 * tk_ctx_error). */
#ifndef GPT_GPT_H
#define GPT_GPT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "tk/tk_run.h"

#define GPT_VOCAB 256 /* byte tokens */

/* ---- Config and the flat parameter buffer (SPEC.md, "Parameters") -------- */
typedef struct gpt_config {
    int L, H, C, T_max, V; /* layers, heads, width, context, vocabulary */
} gpt_config;

/* A preset by name ("tiny", "small", "124m"): 0, or 1 for an unknown name. */
int gpt_preset(const char *name, gpt_config *out);
/* 0 when the kernels support c (head dim 64 or 128, sizes >= 1), else 1
 * with a message that starts with `where` ("" or "checkpoint 'f': "). */
int gpt_config_check(const gpt_config *c, const char *where);

/* The tensors of the buffer: wte, wpe, then per layer the four matrices,
 * then per layer the eight vectors, then lnf_w, lnf_b. */
typedef enum gpt_param {
    GPT_WTE,
    GPT_WPE,
    GPT_QKV_W, /* the per-layer matrices, in buffer order */
    GPT_PROJ_W,
    GPT_FC_W,
    GPT_FCPROJ_W,
    GPT_LN1_W, /* the per-layer vectors, in buffer order */
    GPT_LN1_B,
    GPT_QKV_B,
    GPT_PROJ_B,
    GPT_LN2_W,
    GPT_LN2_B,
    GPT_FC_B,
    GPT_FCPROJ_B,
    GPT_LNF_W,
    GPT_LNF_B
} gpt_param;

typedef struct gpt_tensor {
    char name[24];      /* "wte", "l3.fc_w", "lnf_b" */
    size_t off, n;      /* elements from the buffer's start, element count */
    int64_t rows, cols; /* [out, in] for a matrix, [1, n] for a vector */
    int matrix;         /* 1: decayed, drawn from N(0, std) at init */
    double std;         /* init: N(0, std) for a matrix; a vector is const */
    float value;        /* a vector's init: 1 (LayerNorm weights) or 0 */
} gpt_tensor;

typedef struct gpt_layout {
    gpt_tensor *t; /* 4 + 12·L tensors, in buffer order */
    int count;
    size_t n_params, n_matrix; /* all elements; the matrices' (a prefix) */
} gpt_layout;

int gpt_layout_init(gpt_layout *lay, const gpt_config *c);
void gpt_layout_free(gpt_layout *lay);
/* The index in lay->t of parameter p of layer l (l ignored for wte, wpe,
 * lnf_*). */
int gpt_tensor_id(const gpt_config *c, int l, gpt_param p);

/* ---- Random numbers (SPEC.md, "Random numbers") --------------------------- */
static inline uint64_t gpt_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double gpt_rng_uniform(uint64_t *state) {
    return (double)(gpt_rng_next(state) >> 11) * 0x1.0p-53;
}
#define GPT_DATA_SEED_XOR   0xDA7A5EED0000D47Aull
#define GPT_SAMPLE_SEED_XOR 0x5A3B1E0000C0FFEEull /* sampling's generator */

/* Fills params (host, lay->n_params f32) as SPEC.md's init from seed. */
void gpt_init_params(const gpt_layout *lay, uint64_t seed, float *params);

/* ---- The model on the device ------------------------------------------------ */
/* What a kernel call wrapper does (gpt_op_*): add its workspace to the
 * largest (SIZE), ready its kernel (PREPARE), or run it (RUN). The forward
 * and backward run once in each mode, so the shapes prepared are the shapes
 * run. */
typedef enum gpt_mode { GPT_RUN = 0, GPT_SIZE = 1, GPT_PREPARE = 2 } gpt_mode;

typedef struct gpt_prof gpt_prof; /* --profile (prof.c) */
typedef struct gpt_prep gpt_prep; /* the prepare pass's queue (prep.c) */

/* A layer's saved activations ([rows, ·] bf16 unless f32 is said). */
typedef struct gpt_layer_acts {
    void *r;     /* the stream entering the layer, LN1's input      */
    void *a;     /* LN1's output                                    */
    void *qkv;   /* [rows, 3C]                                      */
    void *y;     /* attention's output                              */
    void *s;     /* the stream after attention, LN2's input         */
    void *m;     /* LN2's output                                    */
    void *u, *g; /* fc's pre-activation and GELU, [rows, 4C]        */
    float *lse;  /* attention's log-sum-exp [B, H, T] f32            */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [rows] f32 */
} gpt_layer_acts;

typedef struct gpt_model {
    tk_ctx *ctx;
    void *stream; /* NULL: the default stream */
    gpt_config cfg;
    gpt_layout lay;
    int B, T;   /* the largest batch the buffers hold: rows = B·T */
    int nranks; /* data-parallel processes: dlogits are scaled by 1 / (B·T·nranks) */
    gpt_mode mode;
    /* The GEMMs' split over K (tk_gemm_params.split_k): 0 the library's
     * choice, with the workspace; 1 never (no workspace); S >= 2 forced. */
    int split_k;
    gpt_prof *prof;   /* NULL: no --profile */
    gpt_prep *prep;   /* GPT_PREPARE: the queue the wrappers add to */
    int prep_threads; /* gpt_model_prepare's threads (0: one a core) */
    /* what gpt_model_prepare took: its prepare calls, the threads that made
     * them and the milliseconds (compiles, or disk and memory hits) */
    int prep_calls, prep_used;
    double prep_ms;
    /* data parallel with the overlap (dp.h): the backward posts each
     * finished range of gradients for its sum over the ranks; NULL: the
     * trainer sums them all after the backward, or runs one process */
    struct gpt_dp *dp;
    /* parameters: f32 master, its bf16 copy (what the kernels read), the f32
     * gradients, AdamW's moments; each n_params elements */
    float *params, *grads, *m, *v;
    uint16_t *params16;
    /* one batch: tokens [B, T] then targets [B, T], i32 */
    int32_t *tokens, *targets;
    gpt_layer_acts *layer; /* [L] */
    void *r_out;           /* the stream after the last layer */
    void *branch;          /* a projection's output before its residual add */
    void *f;               /* the final LayerNorm's output */
    float *lnf_mean, *lnf_rstd;
    void *logits;   /* [rows, V] bf16; the backward's dlogits in place */
    float *losses;  /* [rows] */
    float *scalars; /* [0]: the mean loss, [1]: the gradient norm */
    void *d_stream; /* the gradient along the residual stream [rows, C] */
    void *d_c;      /* a [rows, C] gradient (a branch's input) */
    void *d_4c;     /* [rows, 4C] */
    void *d_qkv;    /* [rows, 3C] */
    void *ws;       /* every call's workspace (one at a time, in order) */
    size_t ws_bytes, ws_need;
    void *arena; /* the one device allocation the buffers above are in */
} gpt_model;

/* Allocates every buffer for batches up to B x T on ctx's device; the
 * workspace comes with gpt_model_prepare. */
int gpt_model_create(tk_ctx *ctx, const gpt_config *c, int B, int T, gpt_model *m);
/* Sizes the workspace and readies every kernel the training steps and the
 * validation batches of B x T will run. */
int gpt_model_prepare(gpt_model *m);
void gpt_model_destroy(gpt_model *m);
/* The device pointers of parameter p of layer l. */
const uint16_t *gpt_w16(const gpt_model *m, int l, gpt_param p);
float *gpt_grad(const gpt_model *m, int l, gpt_param p);
/* Uploads n f32 master weights from host at element off, and their bf16
 * rounding into the copy (init and checkpoint loads). */
int gpt_upload_params(gpt_model *m, const float *host, size_t off, size_t n);

/* A failed tk_* call: prints what failed and returns 1. */
int gpt_tk_fail(tk_ctx *ctx, tk_status s, const char *what);

/* The kernel calls, in the model's mode (ops.c). The workspace is filled in
 * by the calls that take one. */
int gpt_op_gemm(gpt_model *m, const char *what, const tk_gemm_params *p);
int gpt_op_norm(gpt_model *m, const char *what, const tk_norm_params *p);
int gpt_op_norm_bwd(gpt_model *m, const char *what, tk_norm_bwd_params *p);
int gpt_op_attn(gpt_model *m, const char *what, tk_attention_params *p);
int gpt_op_attn_bwd(gpt_model *m, const char *what, tk_attention_bwd_params *p);
int gpt_op_xent(gpt_model *m, const char *what, tk_xent_params *p);
int gpt_op_embed(gpt_model *m, const char *what, const tk_embedding_params *p);
int gpt_op_embed_bwd(gpt_model *m, const char *what, tk_embedding_bwd_params *p);
int gpt_op_bias_grad(gpt_model *m, const char *what, tk_bias_grad_params *p);
int gpt_op_grad_norm(gpt_model *m, const char *what, tk_grad_norm_params *p);
int gpt_op_adamw(gpt_model *m, const char *what, const tk_adamw_params *p);
int gpt_op_zero(gpt_model *m, const char *what, void *p, size_t bytes);

/* ---- The prepare pass on threads (prep.c) ---------------------------------------- */
typedef enum gpt_prep_kind {
    GPT_PREP_GEMM,
    GPT_PREP_NORM,
    GPT_PREP_NORM_BWD,
    GPT_PREP_ATTN,
    GPT_PREP_ATTN_BWD,
    GPT_PREP_XENT,
    GPT_PREP_EMBED,
    GPT_PREP_EMBED_BWD,
    GPT_PREP_BIAS_GRAD,
    GPT_PREP_GRAD_NORM,
    GPT_PREP_ADAMW
} gpt_prep_kind;
/* Queues a copy of a call's parameters (size bytes of the kind's struct). */
int gpt_prep_add(gpt_model *m, gpt_prep_kind kind, const char *what, const void *p, size_t size);
/* Runs pass(m) (in GPT_PREPARE mode) with a queue, then makes the queued
 * prepare calls on `threads` threads (0: one a core, at most 16); the first
 * failure in call order is reported. */
int gpt_prep_pass(gpt_model *m, int (*pass)(gpt_model *), int threads);

/* ---- --profile (prof.c) -------------------------------------------------------- */
gpt_prof *gpt_prof_create(void);
void gpt_prof_destroy(gpt_prof *p);
/* A profiled stretch (one step's kernel calls) begins (after a sync) and
 * ends; each call inside it is charged by gpt_prof_mark under `what`. */
int gpt_prof_begin(gpt_model *m);
void gpt_prof_end(gpt_model *m);
int gpt_prof_mark(gpt_model *m, const char *what);
/* The table: each label's calls and ms per step, largest first. */
void gpt_prof_print(const gpt_prof *p, FILE *f);

/* ---- Forward, backward, optimizer ------------------------------------------ */
/* y [rows, n] = x [rows, k] · Wᵀ (+ bias [n]), W [n, k]: bf16 in and out. */
tk_gemm_params gpt_linear(int64_t rows, int64_t n, int64_t k, const void *x, const void *w,
                          const void *bias, void *y);
/* Layer l's attention of a [B, T] batch: q, k, v strided inside qkv. */
tk_attention_params gpt_attn_params(const gpt_model *m, int l, int B, int T);
enum {
    GPT_FWD_LOSS = 1, /* cross-entropy against m->targets: scalars[0] */
    GPT_FWD_GRAD = 2  /* and dlogits (into logits) for the backward */
};
/* The forward of m->tokens [B, T] (B·T <= the model's rows) up to the
 * logits, and with `what` the loss. */
int gpt_forward(gpt_model *m, int B, int T, int what);
/* The gradients of the last forward (run with GPT_FWD_GRAD) into m->grads,
 * every element written. */
int gpt_backward(gpt_model *m, int B, int T);
/* The AdamW step t (1-based) at learning rate lr: the gradient norm into
 * scalars[1], clipping to 1, decay on the matrices. */
int gpt_optimizer(gpt_model *m, int64_t t, float lr);
/* SPEC.md's learning rate at step t of N with warmup W. */
double gpt_lr(int64_t t, int64_t N, int64_t W, double lr_max);

/* ---- Data (SPEC.md, "Data") -------------------------------------------------- */
typedef struct gpt_data {
    uint8_t *bytes;
    size_t n, n_train, n_val; /* train: bytes[0, n_train), val: the rest */
} gpt_data;

/* Reads the named files (directories: their .h files) up to max_bytes. */
int gpt_data_load(gpt_data *d, const char *const *paths, int npaths, size_t max_bytes);
void gpt_data_free(gpt_data *d);
/* 1 with a message when the splits cannot give rows of T + 1 bytes. */
int gpt_data_check(const gpt_data *d, int T, int val_batches);
/* A training batch: this rank's B rows of the nranks·B drawn from *rng;
 * tokens and targets [B, T] on the host. */
void gpt_data_batch(const gpt_data *d, uint64_t *rng, int B, int T, int rank, int nranks,
                    int32_t *tokens, int32_t *targets);
/* Validation batch i (0 .. nbatches - 1) of B rows at SPEC.md's offsets. */
void gpt_data_val_batch(const gpt_data *d, int i, int nbatches, int B, int T, int32_t *tokens,
                        int32_t *targets);

/* ---- Checkpoints and the gradient dump (SPEC.md) ---------------------------- */
typedef struct gpt_ckpt_state {
    uint64_t seed;
    int64_t step; /* steps done */
    uint64_t data_rng;
} gpt_ckpt_state;

/* FILE.tmp, then renamed over FILE: a failure leaves FILE as it was. */
int gpt_ckpt_save(gpt_model *m, const char *path, const gpt_ckpt_state *st);
/* Reads the header alone: the config and state a file holds (checked:
 * magic, version, header size, config, file size). */
int gpt_ckpt_peek(const char *path, gpt_config *c, gpt_ckpt_state *st);
/* Loads params, m, v (and the bf16 copy) into m, checking everything,
 * the checksum included. */
int gpt_ckpt_load(gpt_model *m, const char *path, gpt_ckpt_state *st);
/* The f32 gradients and the loss, raw (tmp + rename as a checkpoint). */
int gpt_dump_grads(gpt_model *m, const char *path, float loss);

/* ---- The float64 check (check.c) ------------------------------------------------ */
/* The device's loss and gradients on m->tokens / targets [B, T] against a
 * float64 CPU forward and backward of the same model (the weights as the
 * kernels read them, bf16), per tensor, and the reference's own gradients
 * against central differences. 0 when every tensor is within tol. */
int gpt_check(gpt_model *m, int B, int T, double tol);

/* ---- Helpers ------------------------------------------------------------------------ */
/* malloc that prints and returns NULL on failure. */
void *gpt_malloc(size_t bytes);

#endif
