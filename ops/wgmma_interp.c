/* Interpreter semantics of WGMMA and WGMMA_WAIT (ops/wgmma.c).
 *
 * The multiply happens at issue and the wait is a copy: the interpreter is
 * the meaning of a correctly waited program. Per warpgroup instance:
 *   D[m][n] = acc[m][n] + sum over k ascending of A[m][k] * B(k, n)
 * one float add per k, as tk_mma's semantics (the bf16/f16 products are
 * exact in float); B(k, n) = b[k][n] (AB, ATB) or b[n][k] (ABT, ATBT). A
 * shared A contributes rows a_row .. a_row + M - 1 (A[m][k] = a[a_row+m][k]),
 * or transposed (ATB, ATBT) columns: A[m][k] = a[k][a_row+m]; a_row is read
 * from the warpgroup's first active lane and must be a multiple of 8 (rows:
 * the descriptor's core matrices start there) or 64 (columns: a column
 * block), inside the tile. With the race checker on, the shared operands
 * count as read from the issue until the wait that retires the group
 * (ops/race.h); a transposed A, its whole tile. */
#include "ops/interp.h"
#include "ops/race.h"

/* The shared operand's elements (logical row-major), checked in range. */
static tk_status smem_of(tk_interp *I, const tk_op *op, const tk_value *v, int th,
                         const float **out) {
    const tk_type *t = &v->type;
    int64_t off = tk_interp_sv(I, v)[th].i;
    size_t n = (size_t)t->rows * (size_t)t->cols;
    if (off < 0 || (size_t)off > I->smem_n || I->smem_n - (size_t)off < n)
        return tk_interp_fail(I, op, th / 32, TK_ERR_RUNTIME,
                              "shared handle at float offset "
                              "%lld lies outside the block's shared memory",
                              (long long)off);
    *out = I->smem + off;
    return TK_OK;
}

static tk_status issue(tk_interp *I, const tk_op *op, int inst) {
    const tk_type *ct = &op->res[0]->type, *at = &op->opnds[1]->type;
    const int64_t kd = op->attr[0];
    const bool bt = kd == TK_MMA_ABT || kd == TK_MMA_ATBT;
    const bool ta = kd == TK_MMA_ATB || kd == TK_MMA_ATBT;
    const int M = ct->rows, N = ct->cols, K = ta ? at->rows : at->cols,
              th = tk_interp_inst_thread(I, TK_WARPGROUP, inst);
    /* A(m, k) = A[m * am + k * ak] */
    size_t am = (size_t)K, ak = 1, an = (size_t)M * (size_t)K;
    /* NULL: GCC -O2 cannot see that smem_of sets them whenever it returns TK_OK */
    const float *A = NULL, *aread = NULL, *B = NULL, *acc = tk_interp_tile(I, op->opnds[0], inst);
    tk_status s = smem_of(I, op, op->opnds[2], th, &B);
    if (s) return s;
    if (at->kind == TK_KIND_TILE) {
        A = aread = tk_interp_tile(I, op->opnds[1], inst);
    } else {
        int64_t r0 = tk_interp_sv(I, op->opnds[3])[th].i;
        int grid = ta ? 64 : 8, extent = ta ? at->cols : at->rows;
        if (r0 < 0 || r0 % grid || r0 > extent - M)
            return tk_interp_fail(I, op, th / 32, TK_ERR_RUNTIME,
                                  "a_row is %lld; A's %d %s from there must lie inside its "
                                  "%d-%s shared tile, starting at a multiple of %d",
                                  (long long)r0, M, ta ? "columns" : "rows", extent,
                                  ta ? "column" : "row", grid);
        if ((s = smem_of(I, op, op->opnds[1], th, &A))) return s;
        if (ta) { /* the race checker sees the whole tile read */
            am = 1, ak = (size_t)at->cols, an = (size_t)at->rows * (size_t)at->cols;
            aread = A;
            A += r0;
        } else {
            A += (size_t)r0 * (size_t)K;
            aread = A;
        }
    }
    if (I->race) { /* the shared operands stay read until a wait retires the group */
        const tk_type *btt = &op->opnds[2]->type;
        size_t off[2] = {(size_t)(B - I->smem), (size_t)(aread - I->smem)};
        size_t n[2] = {(size_t)btt->rows * (size_t)btt->cols, an};
        if ((s = tk_race_wgmma_issue(I, op, inst, off, n, at->kind == TK_KIND_TILE ? 1 : 2)))
            return s;
    }
    float *out = tk_interp_tile(I, op->res[0], inst);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float x = acc[(size_t)m * N + n];
            for (int k = 0; k < K; k++)
                x = x + A[(size_t)m * am + (size_t)k * ak] *
                            (bt ? B[(size_t)n * K + k] : B[(size_t)k * N + n]);
            out[(size_t)m * N + n] = x;
        }
    return TK_OK;
}

tk_status tk_interp_wgmma(tk_interp *I, const tk_op *op) {
    for (int i = 0; i < tk_interp_ninst(I, TK_WARPGROUP); i++) {
        if (!tk_interp_inst_active(I, TK_WARPGROUP, i)) continue;
        /* the instructions are warpgroup-wide (.sync.aligned): a branch on
         * a warp-varying value must close before them */
        if (!tk_interp_inst_whole(I, TK_WARPGROUP, i))
            return tk_interp_fail(I, op, 4 * i, TK_ERR_RUNTIME,
                                  "warpgroup %d runs with only some of its warps (a branch on "
                                  "a warp-varying value); %s needs all four",
                                  i, tk_op_infos[op->opc].name);
        if (op->opc == TK_OP_WGMMA_WAIT) {
            tk_interp_copy(I, op->res[0], op->opnds[0], tk_interp_inst_warps(TK_WARPGROUP, i));
            if (I->race) tk_race_wgmma_wait(I, i, (int)op->attr[0]);
            continue;
        }
        tk_status s = issue(I, op, i);
        if (s) return s;
    }
    return TK_OK;
}
