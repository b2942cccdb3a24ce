#include "util/decode.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

void tu_decode_plan_ws(tk_ctx *ctx, tk_attention_params *p, int sm, int want_kw,
                       tk_attn_decode_plan *pl) {
    ck_assert_int_eq(tk_attn_decode_plan_kw(ctx, "test", p, sm, false, want_kw, pl), TK_OK);
    float *ws = NULL;
    if (pl->bytes) {
        ws = malloc(pl->bytes);
        ck_assert_ptr_nonnull(ws);
        for (size_t i = 0; i < pl->bytes / sizeof(float); i++) ws[i] = NAN;
    }
    p->workspace = ws, p->workspace_bytes = pl->bytes;
}

void tu_decode_on_interp(tk_ctx *ctx, const tk_attention_params *p, const tk_attn_decode_plan *pl) {
    int parts[3], np = tk_attn_decode_parts(p, pl, parts);
    for (int i = 0; i < np; i++) {
        tk_attention_decode_config cfg = tk_attn_decode_config(p, pl, parts[i]);
        tk_kernel *k = NULL;
        tk_status s = tk_attention_decode_build(ctx, &cfg, &k);
        ck_assert_msg(s == TK_OK, "build: %s", tk_ctx_error(ctx));
        tk_arg args[TK_ATTN_DECODE_MAX_ARGS];
        int n = tk_attn_decode_args(p, pl, parts[i], args);
        s = tk_interp_run(k, n, args);
        ck_assert_msg(s == TK_OK, "run %s: %s", tk_kernel_name(k), tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
}
