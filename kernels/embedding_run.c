/* tk_embedding_forward, tk_embedding_backward and their companions
 * (tk/tk_run_train.h): the parameters checked, the kernels of the
 * specialization from the registry, the launches. The kernels:
 * embedding.c, embedding_sort.c, embedding_sum.c.
 *
 * Every [rows, C] matrix is handed to the row kernels as [rows, R, W]
 * (R = floor(C / W)) and, where W does not divide C, once more as its tail
 * [rows, 1, C mod W] from column R·W. The backward's workspace holds the
 * sort's entries (two buffers of positions and digits, ping-ponged), the
 * chunks' counts and offsets, and the runs' Head and Cont pieces of the
 * rows and of the tail; every region 256-byte aligned. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "embedding_parts.h"
#include "jit/registry.h"
#include "run_checks.h"
#include "tk/tk_run.h"

/* Registry programs per tk_embedding_config: every field a specialization. */
typedef struct emb_key {
    int32_t part, dtype, weight_dtype, pos, cols, warps;
} emb_key;

static tk_status build_emb_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const emb_key *a = key;
    tk_embedding_config c = {.part = a->part,
                             .dtype = (tk_dtype)a->dtype,
                             .weight_dtype = (tk_dtype)a->weight_dtype,
                             .pos = a->pos,
                             .cols = a->cols,
                             .warps = a->warps};
    return tk_embedding_build(ctx, &c, out);
}

static const tk_kernel_def emb_def = {"tk_embedding", sizeof(emb_key), build_emb_key};

static emb_key key_of(const tk_embedding_config *c) {
    emb_key key;
    memset(&key, 0, sizeof key);
    key.part = c->part, key.dtype = c->dtype, key.weight_dtype = c->weight_dtype;
    key.pos = c->pos, key.cols = c->cols, key.warps = c->warps;
    return key;
}

static tk_status program(tk_ctx *ctx, const tk_embedding_config *c, tk_program **prog,
                         tk_prepare_info *info) {
    emb_key key = key_of(c);
    return tk_registry_program(ctx, &emb_def, &key, prog, info);
}

/* Positions and keys meet in f32: exact below 2^24. */
#define MAX_N     (((int64_t)1 << 24) - 1)
#define MAX_VOCAB (((int64_t)1 << 24) - 1)
#define MAX_C     ((int64_t)1 << 20)
#define MAX_SEQ   ((int64_t)INT32_MAX)
#define RUN       TK_EMB_RUN

/* ---- the row tile ------------------------------------------------------------- */
int tk_emb_cols_for(int64_t C) {
    int best = 16;
    int64_t best_tiles = INT64_MAX, best_area = INT64_MAX;
    for (int w = 64; w >= 16; w -= 16) {
        int64_t r = C / w, tiles = (r + 15) / 16 + (C % w != 0), area = tiles * w;
        if (tiles < best_tiles || (tiles == best_tiles && area < best_area))
            best = w, best_tiles = tiles, best_area = area;
    }
    return best;
}

int tk_emb_passes(int64_t vocab) { return vocab < 256 ? 1 : vocab < 65536 ? 2 : 3; }

typedef struct geom {
    int64_t C, W, R, tail; /* R rows of W, then `tail` columns */
} geom;

static geom geom_of(int64_t C) {
    int64_t W = tk_emb_cols_for(C);
    return (geom){.C = C, .W = W, .R = C / W, .tail = C % W};
}

/* Matrix x ([n, C], row pitch ld) as the row kernels see it: the rows
 * (part 0) or the tail (part 1). */
static tk_arg rows_view(const void *x, tk_dtype dt, int64_t n, int64_t ld, geom g, int part) {
    if (!part) {
        int64_t d[3] = {n, g.R, g.W}, s[3] = {ld, g.W, 1};
        return tk_arg_strided((void *)x, dt, 3, d, s);
    }
    int64_t d[3] = {n, 1, g.tail}, s[3] = {ld, g.tail, 1};
    return tk_arg_strided((char *)x + g.R * g.W * (int64_t)tk_dtype_size(dt), dt, 3, d, s);
}

/* The parts a matrix has: the rows where R > 0, the tail where it is. */
static bool has_part(geom g, int part) { return part ? g.tail > 0 : g.R > 0; }

static tk_arg vec(const void *x, tk_dtype dt, int64_t n) {
    return tk_arg_tensor((void *)x, dt, 1, &n);
}

static tk_arg mat(const void *x, tk_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
    int64_t d[2] = {rows, cols}, s[2] = {ld, 1};
    return tk_arg_strided((void *)x, dt, 2, d, s);
}

static int64_t pitch(int64_t stride, int64_t C) { return stride ? stride : C; }

/* ---- the checks ------------------------------------------------------------------ */
/* What both directions share. */
typedef struct shape {
    tk_dtype dt;
    int64_t B, T, C, V, P; /* P: max_seq, or 0 without positions */
} shape;

static tk_status check_dtype(tk_ctx *ctx, const char *fn, const char *name, tk_dtype dt) {
    if (dt == TK_BF16 || dt == TK_F16 || dt == TK_F32) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: %s is %s; expected TK_BF16, TK_F16 or TK_F32", fn, name,
                            tk_dtype_name(dt));
}

static tk_status check_shape(tk_ctx *ctx, const char *fn, const shape *s) {
    tk_status st;
    if ((st = check_dtype(ctx, fn, "dtype", s->dt)) ||
        (st = tk_run_check_size(ctx, fn, "batch", s->B, MAX_N)) ||
        (st = tk_run_check_size(ctx, fn, "seq", s->T, MAX_N)))
        return st;
    if (s->B * s->T > MAX_N)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: batch x seq is %lld; expected at most 2^24 - 1 (positions "
                                "are sorted as f32, exact below 2^24)",
                                fn, (long long)(s->B * s->T));
    if ((st = tk_run_check_size(ctx, fn, "channels", s->C, MAX_C)) ||
        (st = tk_run_check_size(ctx, fn, "vocab", s->V, MAX_VOCAB)))
        return st;
    if (s->P && (s->P < s->T || s->P > MAX_SEQ))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: max_seq is %lld; expected seq (%lld) .. 2^31 - 1 (the "
                                "position table's rows)",
                                fn, (long long)s->P, (long long)s->T);
    return TK_OK;
}

/* A pointer: present where required, aligned to its element. */
static tk_status check_ptr(tk_ctx *ctx, const char *fn, const char *name, const void *ptr,
                           bool required, size_t align) {
    if (!ptr)
        return required ? tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, name)
                        : TK_OK;
    if ((uintptr_t)ptr % align)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is not %zu-byte aligned", fn, name,
                                align);
    return TK_OK;
}

/* A row pitch: 0 (C) or C and more, with the last row's end below 2^60. */
static tk_status check_pitch(tk_ctx *ctx, const char *fn, const char *name, int64_t stride,
                             int64_t rows, int64_t C) {
    int64_t ld = pitch(stride, C);
    if (stride < 0 || (stride && stride < C) ||
        (rows > 1 && ld > (TK_RUN_MAX_OFFSET - C) / (rows - 1)))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is %lld; expected 0 (dense) or channels (%lld) and "
                                "more, with (rows - 1) x %s + channels below 2^60",
                                fn, name, (long long)stride, (long long)C, name);
    return TK_OK;
}

/* ---- the forward ------------------------------------------------------------------ */
#define FWD_MIN sizeof(tk_embedding_params)

static tk_dtype weight_dtype(const tk_embedding_params *p) {
    return p->weight_dtype ? p->weight_dtype : p->dtype;
}

static shape fwd_shape(const tk_embedding_params *p) {
    return (shape){p->dtype, p->batch, p->seq, p->channels, p->vocab, p->wpe ? p->max_seq : 0};
}

static tk_status check_fwd(tk_ctx *ctx, const char *fn, const tk_embedding_params *p) {
    shape sh = fwd_shape(p);
    tk_status s = check_shape(ctx, fn, &sh);
    if (!s && p->weight_dtype) s = check_dtype(ctx, fn, "weight_dtype", p->weight_dtype);
    if (s) return s;
    size_t ws = tk_dtype_size(weight_dtype(p)), os = tk_dtype_size(p->dtype);
    int64_t N = p->batch * p->seq, C = p->channels;
    if ((s = check_ptr(ctx, fn, "tokens", p->tokens, true, sizeof(int32_t))) ||
        (s = check_ptr(ctx, fn, "wte", p->wte, true, ws)) ||
        (s = check_ptr(ctx, fn, "wpe", p->wpe, false, ws)) ||
        (s = check_ptr(ctx, fn, "out", p->out, true, os)) ||
        (s = check_pitch(ctx, fn, "wte_stride", p->wte_stride, p->vocab, C)) ||
        (s = check_pitch(ctx, fn, "wpe_stride", p->wpe_stride, p->wpe ? p->max_seq : 1, C)) ||
        (s = check_pitch(ctx, fn, "out_stride", p->out_stride, N, C)))
        return s;
    return TK_OK;
}

static tk_embedding_config fwd_config(const tk_embedding_params *p, geom g) {
    return (tk_embedding_config){.part = TK_EMB_FWD,
                                 .dtype = p->dtype,
                                 .weight_dtype = weight_dtype(p),
                                 .pos = p->wpe != NULL,
                                 .cols = (int)g.W};
}

int tk_emb_fwd_launches(const tk_embedding_params *p, tk_emb_launch out[2]) {
    geom g = geom_of(p->channels);
    tk_dtype wd = weight_dtype(p);
    int64_t N = p->batch * p->seq, C = p->channels, d[2] = {p->batch, p->seq};
    int m = 0;
    for (int part = 0; part < 2; part++) {
        if (!has_part(g, part)) continue;
        tk_arg *a = out[m].args;
        int n = 0;
        a[n++] = tk_arg_tensor((void *)p->tokens, TK_I32, 2, d);
        a[n++] = rows_view(p->wte, wd, p->vocab, pitch(p->wte_stride, C), g, part);
        if (p->wpe) a[n++] = rows_view(p->wpe, wd, p->max_seq, pitch(p->wpe_stride, C), g, part);
        a[n++] = rows_view(p->out, p->dtype, N, pitch(p->out_stride, C), g, part);
        out[m].cfg = fwd_config(p, g);
        out[m++].n = n;
    }
    return m;
}

static tk_status fwd_read(tk_ctx *ctx, const char *fn, const tk_embedding_params *user,
                          tk_embedding_params *p, tk_program **prog, tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, FWD_MIN);
    if (!s) s = check_fwd(ctx, fn, p);
    if (s) return s;
    tk_embedding_config c = fwd_config(p, geom_of(p->channels));
    return program(ctx, &c, prog, info);
}

tk_status tk_embedding_forward_prepare(tk_ctx *ctx, const tk_embedding_params *user,
                                       tk_prepare_info *info) {
    tk_embedding_params p;
    tk_program *prog;
    return fwd_read(ctx, "tk_embedding_forward_prepare", user, &p, &prog, info);
}

tk_status tk_embedding_forward(tk_ctx *ctx, const tk_embedding_params *user, void *stream) {
    tk_embedding_params p;
    tk_program *prog;
    tk_status s = fwd_read(ctx, "tk_embedding_forward", user, &p, &prog, NULL);
    if (s) return s;
    tk_emb_launch l[2];
    int n = tk_emb_fwd_launches(&p, l);
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog, l[i].n, l[i].args, stream);
    return s;
}

/* ---- the backward's workspace --------------------------------------------------- */
#define BWD_MIN sizeof(tk_embedding_bwd_params)

/* Byte offsets of the workspace's regions; part 1 is the tail's. */
typedef struct layout {
    size_t pos[2], aux[2], cnt, off, head[2], cont[2], total;
} layout;

static size_t take(size_t *at, size_t bytes) {
    size_t here = *at;
    *at += (bytes + 255) / 256 * 256;
    return here;
}

static int64_t runs_of(int64_t N) { return (N + RUN - 1) / RUN; }

static layout layout_of(const tk_embedding_bwd_params *p) {
    int64_t N = p->batch * p->seq, K = (N + TK_EMB_CHUNK - 1) / TK_EMB_CHUNK, Q = runs_of(N);
    geom g = geom_of(p->channels);
    layout l = {0};
    size_t at = 0, f = sizeof(float), e = (size_t)N * f;
    for (int i = 0; i < 2; i++) l.pos[i] = take(&at, e), l.aux[i] = take(&at, e);
    l.cnt = take(&at, (size_t)K * 256 * f);
    l.off = take(&at, (size_t)K * 256 * f);
    int64_t rows[2] = {16 * ((g.R + 15) / 16), g.tail ? 16 : 0};
    for (int i = 0; i < 2; i++) {
        size_t piece = (size_t)Q * (size_t)rows[i] * (size_t)g.W * f;
        l.head[i] = take(&at, piece), l.cont[i] = take(&at, piece);
    }
    l.total = at;
    return l;
}

/* ---- the backward's checks ------------------------------------------------------ */
static shape bwd_shape(const tk_embedding_bwd_params *p) {
    return (shape){p->dtype, p->batch, p->seq, p->channels, p->vocab, p->dwpe ? p->max_seq : 0};
}

static tk_status check_bwd_sizes(tk_ctx *ctx, const char *fn, const tk_embedding_bwd_params *p) {
    shape sh = bwd_shape(p);
    return check_shape(ctx, fn, &sh);
}

static tk_status check_bwd(tk_ctx *ctx, const char *fn, const tk_embedding_bwd_params *p) {
    tk_status s = check_bwd_sizes(ctx, fn, p);
    if (s) return s;
    if (p->accumulate != 0 && p->accumulate != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: accumulate is %d; expected 0 or 1",
                                fn, p->accumulate);
    int64_t N = p->batch * p->seq, C = p->channels;
    if ((s = check_ptr(ctx, fn, "tokens", p->tokens, true, sizeof(int32_t))) ||
        (s = check_ptr(ctx, fn, "dout", p->dout, true, tk_dtype_size(p->dtype))) ||
        (s = check_ptr(ctx, fn, "dwte", p->dwte, true, sizeof(float))) ||
        (s = check_ptr(ctx, fn, "dwpe", p->dwpe, false, sizeof(float))) ||
        (s = check_ptr(ctx, fn, "workspace", p->workspace, true, 16)) ||
        (s = check_pitch(ctx, fn, "dout_stride", p->dout_stride, N, C)) ||
        (s = check_pitch(ctx, fn, "dwte_stride", p->dwte_stride, p->vocab, C)) ||
        (s = check_pitch(ctx, fn, "dwpe_stride", p->dwpe_stride, p->dwpe ? p->max_seq : 1, C)))
        return s;
    size_t need = layout_of(p).total;
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; batch x seq %lld, channels %lld need "
                                "%zu (tk_embedding_backward_workspace)",
                                fn, p->workspace_bytes, (long long)N, (long long)C, need);
    return TK_OK;
}

/* ---- the backward's launches ---------------------------------------------------- */
typedef struct bwd {
    const tk_embedding_bwd_params *p;
    geom g;
    layout l;
    int64_t N, K, Q, ld;
    char *ws;
    tk_emb_launch *out;
    int m;
} bwd;

static float *region(const bwd *b, size_t off) { return (float *)(b->ws + off); }

/* Appends a launch of `part` with its n arguments. */
static void launch(bwd *b, int part, tk_dtype dt, int cols, int n, const tk_arg *args) {
    tk_emb_launch *l = &b->out[b->m++];
    l->cfg = (tk_embedding_config){.part = part, .dtype = dt, .cols = cols};
    l->n = n;
    for (int i = 0; i < n; i++) l->args[i] = args[i];
}

static void zero_and_dwpe(bwd *b) {
    const tk_embedding_bwd_params *p = b->p;
    int64_t C = p->channels;
    if (!p->accumulate) {
        tk_arg a[1] = {mat(p->dwte, TK_F32, p->vocab, C, pitch(p->dwte_stride, C))};
        launch(b, TK_EMB_ZERO, TK_DT_NONE, 0, 1, a);
    }
    if (!p->dwpe) return;
    int64_t d[3] = {p->batch, p->seq, C}, s[3] = {p->seq * b->ld, b->ld, 1};
    tk_arg a[3] = {
        tk_arg_strided((void *)p->dout, p->dtype, 3, d, s),
        mat(p->dwpe, TK_F32, p->accumulate ? p->seq : p->max_seq, C, pitch(p->dwpe_stride, C)),
        tk_arg_i32(p->accumulate)};
    launch(b, TK_EMB_DWPE, p->dtype, 0, 3, a);
}

/* The entries' arrays of buffer i: positions, then digits (keys). */
static tk_arg entries(const bwd *b, int i, int aux) {
    return vec(region(b, aux ? b->l.aux[i] : b->l.pos[i]), TK_F32, b->N);
}

/* Pass `pass` of `passes`, from buffer `in` to the other. */
static void sort_pass(bwd *b, int in, int pass, int passes, int64_t div) {
    const tk_embedding_bwd_params *p = b->p;
    int64_t cnt[2] = {b->K, 256};
    tk_arg c = tk_arg_tensor(region(b, b->l.cnt), TK_F32, 2, cnt);
    tk_arg o = tk_arg_tensor(region(b, b->l.off), TK_F32, 2, cnt);
    tk_arg hist[2] = {entries(b, in, 1), c}, scan[2] = {c, o};
    launch(b, TK_EMB_HIST, TK_DT_NONE, 0, 2, hist);
    launch(b, TK_EMB_SCAN, TK_DT_NONE, 0, 2, scan);
    tk_arg sc[8] = {entries(b, in, 0),
                    entries(b, in, 1),
                    o,
                    vec(p->tokens, TK_I32, b->N),
                    entries(b, 1 - in, 0),
                    entries(b, 1 - in, 1),
                    tk_arg_i64(p->vocab),
                    tk_arg_i64(pass == passes - 1 ? 0 : div)};
    launch(b, TK_EMB_SCATTER, TK_DT_NONE, 0, 8, sc);
}

/* The sort: KEYS into buffer 0, then each pass from buffer i to 1 - i.
 * Returns the buffer holding the sorted (position, key) entries. */
static int sort(bwd *b) {
    const tk_embedding_bwd_params *p = b->p;
    tk_arg keys[4] = {vec(p->tokens, TK_I32, b->N), entries(b, 0, 0), entries(b, 0, 1),
                      tk_arg_i64(p->vocab)};
    launch(b, TK_EMB_KEYS, TK_DT_NONE, 0, 4, keys);
    int passes = tk_emb_passes(p->vocab), in = 0;
    int64_t div = 256; /* the next pass's digit: key / div mod 256 */
    for (int i = 0; i < passes; i++, in = 1 - in, div *= 256) sort_pass(b, in, i, passes, div);
    return in;
}

/* SEGSUM and FIXUP over one part of the rows (0: the rows, 1: the tail). */
static void sums(bwd *b, int sorted, int part) {
    const tk_embedding_bwd_params *p = b->p;
    geom g = b->g;
    int64_t C = p->channels, hr = part ? 16 : 16 * ((g.R + 15) / 16), W = part ? g.tail : g.W;
    int64_t hd[3] = {b->Q, hr, W}, hs[3] = {hr * g.W, g.W, 1}, ks = RUN;
    tk_arg key = entries(b, sorted, 1);
    tk_arg head = tk_arg_strided(region(b, b->l.head[part]), TK_F32, 3, hd, hs);
    tk_arg cont = tk_arg_strided(region(b, b->l.cont[part]), TK_F32, 3, hd, hs);
    tk_arg dw = rows_view(p->dwte, TK_F32, p->vocab, pitch(p->dwte_stride, C), g, part);
    tk_arg seg[7] = {entries(b, sorted, 0),
                     key,
                     rows_view(p->dout, p->dtype, b->N, b->ld, g, part),
                     dw,
                     head,
                     cont,
                     tk_arg_i32(p->accumulate)};
    launch(b, TK_EMB_SEGSUM, p->dtype, (int)g.W, 7, seg);
    /* KeyS: the first key of each 32-entry range */
    tk_arg fix[5] = {key, tk_arg_strided(region(b, b->l.aux[sorted]), TK_F32, 1, &b->Q, &ks), head,
                     cont, dw};
    launch(b, TK_EMB_FIXUP, TK_DT_NONE, (int)g.W, 5, fix);
}

int tk_emb_bwd_launches(const tk_embedding_bwd_params *p, tk_emb_launch out[TK_EMB_MAX_LAUNCHES]) {
    bwd b = {.p = p, .g = geom_of(p->channels), .l = layout_of(p), .out = out};
    b.N = p->batch * p->seq, b.K = (b.N + TK_EMB_CHUNK - 1) / TK_EMB_CHUNK, b.Q = runs_of(b.N);
    b.ld = pitch(p->dout_stride, p->channels), b.ws = p->workspace;
    zero_and_dwpe(&b);
    int sorted = sort(&b);
    for (int part = 0; part < 2; part++)
        if (has_part(b.g, part)) sums(&b, sorted, part);
    return b.m;
}

/* ---- the backward's entry points ------------------------------------------------ */
static tk_status bwd_read(tk_ctx *ctx, const char *fn, const tk_embedding_bwd_params *user,
                          tk_embedding_bwd_params *p, bool full) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, BWD_MIN);
    if (!s) s = full ? check_bwd(ctx, fn, p) : check_bwd_sizes(ctx, fn, p);
    return s;
}

tk_status tk_embedding_backward_workspace(tk_ctx *ctx, const tk_embedding_bwd_params *user,
                                          size_t *bytes) {
    const char *fn = "tk_embedding_backward_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_embedding_bwd_params p;
    tk_status s = bwd_read(ctx, fn, user, &p, false);
    if (!s) *bytes = layout_of(&p).total;
    return s;
}

/* Every launch's program (prog NULL: only readied), compiled side
 * by side on a cold prepare (info: the whole preparation). */
static tk_status bwd_programs(tk_ctx *ctx, const tk_emb_launch *l, int n, tk_program **prog,
                              tk_prepare_info *info) {
    emb_key key[TK_EMB_MAX_LAUNCHES];
    tk_program *own[TK_EMB_MAX_LAUNCHES];
    for (int i = 0; i < n; i++) key[i] = key_of(&l[i].cfg);
    return tk_registry_programs_of(ctx, &emb_def, n, key, prog ? prog : own, info);
}

tk_status tk_embedding_backward_prepare(tk_ctx *ctx, const tk_embedding_bwd_params *user,
                                        tk_prepare_info *info) {
    tk_embedding_bwd_params p;
    tk_status s = bwd_read(ctx, "tk_embedding_backward_prepare", user, &p, true);
    if (s) return s;
    tk_emb_launch l[TK_EMB_MAX_LAUNCHES];
    return bwd_programs(ctx, l, tk_emb_bwd_launches(&p, l), NULL, info);
}

tk_status tk_embedding_backward(tk_ctx *ctx, const tk_embedding_bwd_params *user, void *stream) {
    tk_embedding_bwd_params p;
    tk_status s = bwd_read(ctx, "tk_embedding_backward", user, &p, true);
    if (s) return s;
    tk_emb_launch l[TK_EMB_MAX_LAUNCHES];
    tk_program *prog[TK_EMB_MAX_LAUNCHES];
    int n = tk_emb_bwd_launches(&p, l);
    if ((s = bwd_programs(ctx, l, n, prog, NULL))) return s;
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}
