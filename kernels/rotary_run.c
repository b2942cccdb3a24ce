/* tk_rotary and tk_rotary_prepare (tk/tk_run.h): the parameters checked, the
 * kernels of the specialization from the registry, one launch for q and one
 * for k. The kernel: rotary.c. tk_attention_forward with a rotation rotates
 * K through these launches too (kernels/attention_run.c). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jit/registry.h"
#include "run_checks.h"
#include "rotary_parts.h"
#include "tk/tk_run.h"

/* Registry programs per tk_rotary_config: every field a specialization. */
typedef struct rotary_key {
    int32_t dtype, style, head_dim, rotary_dim, tables, positions, inverse, in_place;
} rotary_key;

static tk_status build_rotary_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const rotary_key *a = key;
    tk_rotary_config cfg = {.dtype = (tk_dtype)a->dtype,
                            .style = a->style,
                            .head_dim = a->head_dim,
                            .rotary_dim = a->rotary_dim,
                            .tables = a->tables,
                            .positions = a->positions,
                            .inverse = a->inverse,
                            .in_place = a->in_place};
    return tk_rotary_build(ctx, &cfg, out);
}

static const tk_kernel_def rotary_def = {"tk_rotary", sizeof(rotary_key), build_rotary_key};

static rotary_key key_of(const tk_rotary_config *c) {
    rotary_key key;
    memset(&key, 0, sizeof key);
    key.dtype = c->dtype, key.style = c->style, key.head_dim = c->head_dim;
    key.rotary_dim = c->rotary_dim, key.tables = c->tables, key.positions = c->positions;
    key.inverse = c->inverse, key.in_place = c->in_place;
    return key;
}

tk_status tk_rotary_program(tk_ctx *ctx, const tk_rotary_config *c, tk_program **prog,
                            tk_prepare_info *info) {
    rotary_key key = key_of(c);
    return tk_registry_program(ctx, &rotary_def, &key, prog, info);
}

/* The end of the first layout: every field of today's struct is required. */
#define PARAMS_MIN (offsetof(tk_rotary_params, base) + sizeof(float))
/* Grid y is ceil(heads / 8) and z the batch (each at most 65535); tokens,
 * table rows and positions are indexed as int32. */
#define MAX_GRID   65535
#define MAX_SEQ    ((int64_t)INT32_MAX)
#define MAX_OFFSET ((int64_t)1 << 60)

static int rotary_dim_of(const tk_rotary_params *p) {
    return p->rotary_dim ? p->rotary_dim : p->head_dim;
}

static float base_of(const tk_rotary_params *p) { return p->base != 0.0f ? p->base : 10000.0f; }

static tk_status check_kind(tk_ctx *ctx, const char *fn, const tk_rotary_params *p) {
    if (p->dtype != TK_BF16 && p->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(p->dtype));
    if (p->style != TK_ROTARY_NEOX && p->style != TK_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: style is %d; expected TK_ROTARY_NEOX or TK_ROTARY_GPTJ", fn,
                                p->style);
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim is %d; expected 64, 128 or 256", fn, p->head_dim);
    int rd = rotary_dim_of(p);
    if (rd < 2 || rd > p->head_dim || rd % 2)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary_dim is %d; expected 0 (head_dim) or an even number "
                                "in 2 .. head_dim (%d)",
                                fn, p->rotary_dim, p->head_dim);
    if (p->inverse != 0 && p->inverse != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: inverse is %d; expected 0 or 1", fn,
                                p->inverse);
    return TK_OK;
}

/* A [B, H, N, D] tensor's strides: all 0 (dense), or >= 0 with the dim
 * stride >= 1 and every element's offset below 2^60 (the kernel's i64
 * address math never wraps). */
static tk_status check_strides(tk_ctx *ctx, const char *fn, const char *name, const int64_t st[4],
                               const int64_t dims[4]) {
    if (!st[0] && !st[1] && !st[2] && !st[3]) return TK_OK;
    int64_t end = 0;
    for (int d = 0; d < 4; d++) {
        if (st[d] < (d == 3) || st[d] > MAX_OFFSET)
            return tk_ctx_set_error(
                ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is %lld; expected %s", fn, name, d,
                (long long)st[d], d == 3 ? "1 .. 2^60 (the dim stride)" : "0 .. 2^60");
        if (st[d] && dims[d] - 1 > (MAX_OFFSET - end) / st[d])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s_strides reach past 2^60 elements", fn, name);
        end += (dims[d] - 1) * st[d];
    }
    return TK_OK;
}

static bool same_strides(const int64_t a[4], const int64_t b[4]) {
    return !memcmp(a, b, 4 * sizeof *a);
}

/* One of q and k: its pointers, heads and strides. */
static tk_status check_tensor(tk_ctx *ctx, const char *fn, const tk_rotary_params *p, bool is_k) {
    const char *n = is_k ? "k" : "q", *no = is_k ? "k_out" : "q_out";
    const void *in = is_k ? p->k : p->q, *out = is_k ? p->k_out : p->q_out;
    const int64_t *si = is_k ? p->k_strides : p->q_strides;
    const int64_t *so = is_k ? p->k_out_strides : p->q_out_strides;
    int64_t h = is_k ? p->heads_k : p->heads_q;
    if (!in) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, n);
    if (!out) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, no);
    tk_status s = tk_run_check_size(ctx, fn, is_k ? "heads_k" : "heads_q", h, MAX_GRID);
    const int64_t dims[4] = {p->batch, h, p->seq, p->head_dim};
    if (s || (s = check_strides(ctx, fn, n, si, dims)) ||
        (s = check_strides(ctx, fn, no, so, dims)))
        return s;
    if (in == out && !same_strides(si, so))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is %s (in place) with other strides; in place they must "
                                "be equal",
                                fn, no, n);
    return TK_OK;
}

static tk_status check_angles(tk_ctx *ctx, const char *fn, const tk_rotary_params *p) {
    if (!p->cos != !p->sin)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is set and %s is NULL", fn,
                                p->cos ? "cos" : "sin", p->cos ? "sin" : "cos");
    if (!p->cos) {
        if (!(p->base >= 0.0f) || isinf(p->base))
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: base is %g; expected 0 (10000) or a finite value > 0", fn,
                                    (double)p->base);
        return TK_OK;
    }
    if (p->style == TK_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: cos/sin tables with TK_ROTARY_GPTJ are not supported; give "
                                "a base (cos and sin NULL)",
                                fn);
    /* without positions token n reads row n; with them a row past the
     * table reads 0 in the kernel */
    int64_t least = p->positions ? 1 : p->seq;
    if (p->table_rows < least || p->table_rows > MAX_SEQ)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: table_rows is %lld; expected %lld .. %lld (%s)", fn,
                                (long long)p->table_rows, (long long)least, (long long)MAX_SEQ,
                                p->positions ? "rows are positions" : "token n reads row n");
    return TK_OK;
}

static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_rotary_params *p) {
    tk_status s = check_kind(ctx, fn, p);
    if (s || (s = tk_run_check_size(ctx, fn, "batch", p->batch, MAX_GRID)) ||
        (s = tk_run_check_size(ctx, fn, "seq", p->seq, MAX_SEQ)) ||
        (s = check_tensor(ctx, fn, p, false)))
        return s;
    if (p->k && (s = check_tensor(ctx, fn, p, true))) return s;
    if (!p->k && p->k_out)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: k_out is set and k is NULL; without k there is no k_out", fn);
    return check_angles(ctx, fn, p);
}

static tk_rotary_config config_of(const tk_rotary_params *p, bool is_k) {
    const void *in = is_k ? p->k : p->q, *out = is_k ? p->k_out : p->q_out;
    return (tk_rotary_config){.dtype = p->dtype,
                              .style = p->style,
                              .head_dim = p->head_dim,
                              .rotary_dim = rotary_dim_of(p),
                              .tables = p->cos != NULL,
                              .positions = p->positions != NULL,
                              .inverse = p->inverse,
                              .in_place = in == out};
}

static tk_arg tensor4(const void *data, tk_dtype dt, const int64_t dims[4], const int64_t st[4]) {
    bool dense = !st[0] && !st[1] && !st[2] && !st[3];
    return dense ? tk_arg_tensor((void *)data, dt, 4, dims)
                 : tk_arg_strided((void *)data, dt, 4, dims, st);
}

static void launch_of(const tk_rotary_params *p, bool is_k, tk_rotary_launch *l) {
    int64_t h = is_k ? p->heads_k : p->heads_q;
    const int64_t dims[4] = {p->batch, h, p->seq, p->head_dim};
    int64_t half = rotary_dim_of(p) / 2, td[2] = {p->table_rows, half}, pd[2] = {p->batch, p->seq};
    tk_arg *a = l->args;
    int n = 0;
    l->cfg = config_of(p, is_k);
    a[n++] = tensor4(is_k ? p->k : p->q, p->dtype, dims, is_k ? p->k_strides : p->q_strides);
    if (!l->cfg.in_place)
        a[n++] = tensor4(is_k ? p->k_out : p->q_out, p->dtype, dims,
                         is_k ? p->k_out_strides : p->q_out_strides);
    if (p->cos) {
        a[n++] = tk_arg_tensor((void *)p->cos, TK_F32, 2, td);
        a[n++] = tk_arg_tensor((void *)p->sin, TK_F32, 2, td);
    }
    if (p->positions) a[n++] = tk_arg_tensor((void *)p->positions, TK_I32, 2, pd);
    if (!p->cos) a[n++] = tk_arg_f32(base_of(p));
    l->n = n;
}

int tk_rotary_launches(const tk_rotary_params *p, tk_rotary_launch out[2]) {
    launch_of(p, false, &out[0]);
    if (!p->k) return 1;
    launch_of(p, true, &out[1]);
    return 2;
}

/* The checked parameters and the programs of q's and k's launches (the
 * same program when their configs agree). */
static tk_status read_params(tk_ctx *ctx, const char *fn, const tk_rotary_params *user,
                             tk_rotary_params *p, tk_program *prog[2], tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, PARAMS_MIN);
    if (!s) s = check_params(ctx, fn, p);
    if (s) return s;
    tk_rotary_config cq = config_of(p, false), ck = config_of(p, true);
    rotary_key key[2] = {key_of(&cq), key_of(&ck)};
    prog[1] = NULL; /* q's and k's compiled side by side when cold */
    return tk_registry_programs_of(ctx, &rotary_def, p->k ? 2 : 1, key, prog, info);
}

tk_status tk_rotary_prepare(tk_ctx *ctx, const tk_rotary_params *user, tk_prepare_info *info) {
    tk_rotary_params p;
    tk_program *prog[2];
    return read_params(ctx, "tk_rotary_prepare", user, &p, prog, info);
}

tk_status tk_rotary(tk_ctx *ctx, const tk_rotary_params *user, void *stream) {
    tk_rotary_params p;
    tk_program *prog[2];
    tk_status s = read_params(ctx, "tk_rotary", user, &p, prog, NULL);
    if (s) return s;
    tk_rotary_launch l[2];
    int n = tk_rotary_launches(&p, l);
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}
