/* Interpreter semantics of MMA (ops/mma.c).
 *
 * C[m][n] = c[m][n] (or 0) + sum over k ascending of A[m][k] * B[k][n], one
 * float add per k: the bf16/f16 products are exact in float, so only the
 * accumulation rounds. Layouts only change register fragments, not the
 * logical tiles: AB  a M×K, b K×N;  ABT a M×K, b N×K;  ATB a K×M, b K×N;
 * ATBT a K×M, b N×K.
 * A warpgroup A (64·q rows) pairs with a warp-owned B: warp w = 0..3 of the
 * group computes rows 64q'+16w .. 64q'+16w+15 (every q') of the group's
 * result with warp w's own B. */
#include "ops/interp.h"

typedef struct mma_dims {
    int m, n, k;
    bool at, bt;
} mma_dims;

static mma_dims dims_of(const tk_op *op) {
    const tk_type *a = &op->opnds[0]->type, *b = &op->opnds[1]->type;
    int64_t kd = op->attr[0];
    mma_dims d = {.at = kd == TK_MMA_ATB || kd == TK_MMA_ATBT,
                  .bt = kd == TK_MMA_ABT || kd == TK_MMA_ATBT};
    d.m = d.at ? a->cols : a->rows;
    d.k = d.at ? a->rows : a->cols;
    d.n = d.bt ? b->rows : b->cols;
    return d;
}

/* Row m of the result from A, B and (optional) C of one instance. */
static void mma_row(const mma_dims *d, int m, const float *A, const float *B, const float *C,
                    float *out) {
    for (int n = 0; n < d->n; n++) {
        float acc = C ? C[(size_t)m * d->n + n] : 0.0f;
        for (int k = 0; k < d->k; k++) {
            float x = d->at ? A[(size_t)k * d->m + m] : A[(size_t)m * d->k + k];
            float y = d->bt ? B[(size_t)n * d->k + k] : B[(size_t)k * d->n + n];
            acc = acc + x * y;
        }
        out[(size_t)m * d->n + n] = acc;
    }
}

tk_status tk_interp_mma(tk_interp *I, const tk_op *op) {
    mma_dims d = dims_of(op);
    tk_owner o = op->res[0]->type.owner;
    const tk_value *c = op->nopnds > 2 ? op->opnds[2] : NULL;
    for (int i = 0; i < tk_interp_ninst(I, o); i++) {
        if (!tk_interp_inst_active(I, o, i)) continue;
        const float *A = tk_interp_tile(I, op->opnds[0], i);
        const float *C = c ? tk_interp_tile(I, c, i) : NULL;
        float *out = tk_interp_tile(I, op->res[0], i);
        for (int m = 0; m < d.m; m++) {
            /* the warp of the group that owns row m brings its own B */
            int bw = o == TK_WARPGROUP ? 4 * i + (m % 64) / 16 : i;
            mma_row(&d, m, A, tk_interp_tile(I, op->opnds[1], bw), C, out);
        }
    }
    return TK_OK;
}
