/* Block-wide copies between a global window and a shared tile (COPY_G2S,
 * COPY_S2G; rules: ops/memory.c).
 *
 * The tile is cut into 16-byte chunks, row-major (cols * size is a multiple
 * of 16 since cols % 16 == 0); in round k thread tid handles chunk
 * tid + k*NT (NT = threads per block), so a warp touches 512 consecutive
 * bytes of a row band: coalesced in global memory, conflict-free in shared
 * (ops/nv/mem.c). When NT is a multiple of the chunks per row, round k is
 * round 0 moved down NT/cpr rows: its addresses are round 0's plus a
 * constant (shared) or one run-time stride (global), which keeps the
 * per-thread state that LLVM hoists out of loops small.
 *
 * Fast paths (chosen by uniform run-time tests per copy):
 *   G2S async, whole tile inside the view and 16-byte aligned rows with unit
 *     column stride (the steady state of every k-loop): the rounds are
 *     unrolled into plain cp.async.cg 16-byte copies with no per-chunk tests.
 *     The thread's offsets (global i64, shared i32) are computed once from
 *     tid and the row stride, which do not change inside a kernel, so LLVM
 *     hoists them out of loops; per round the global address steps by one
 *     run-time stride and the shared one by a constant (an immediate offset).
 *   G2S async otherwise, rows 16-byte aligned, unit column stride, col0 >= 0:
 *     one cp.async.cg 16-byte per chunk in a rolled loop, src-size = the
 *     chunk's bytes inside the view (0 for rows / leading indices out of
 *     range, partial at the right edge); cp.async zero-fills the rest, the
 *     required fill.
 *   G2S sync / S2G: aligned and the whole tile inside the view: one 16-byte
 *     vector load + store per chunk.
 * Slow path, same chunks: each element is loaded (masked: `fill` outside the
 * view) from its own address and the chunk is written to shared memory as
 * one 16-byte store; S2G reads the chunk and stores each element masked. */
#include "ops/nv/lower.h"

typedef struct copy {
    const tk_type *st;
    LLVMValueRef base; /* shared stage */
    tk_gwin w;
    int rows, cols, esz, ce, cpr, total, nt, rounds; /* ce: elements per chunk */
    int dr;                                          /* rows between rounds when affine, else 0 */
    LLVMValueRef fill;
    LLVMTypeRef ety;
    /* the thread's chunk in round 0 (affine case) */
    LLVMValueRef r0, c0, g0, s0, gstep; /* gstep: global bytes per round (i64) */
    LLVMValueRef escol;                 /* global bytes between row elements (i64) */
    bool add;                           /* S2G: tk_copy_to_global_add        */
    LLVMValueRef l2;                    /* the view's L2 policy, or NULL    */
} copy;

typedef struct chunk {
    LLVMValueRef r, col; /* tile position of its first element (i32) */
    LLVMValueRef g, s;   /* global / shared addresses                */
    LLVMValueRef row_ok; /* its row (and leading indices) inside the view */
} chunk;

static LLVMValueRef i32c(tk_lower *L, int64_t v) { return tk_lw_i32c(L, v); }

static void affine_init(tk_lower *L, copy *c) {
    LLVMBuilderRef b = L->b;
    c->r0 = LLVMBuildUDiv(b, L->ctid, i32c(L, c->cpr), "");
    c->c0 = LLVMBuildMul(b, LLVMBuildURem(b, L->ctid, i32c(L, c->cpr), ""), i32c(L, c->ce), "");
    c->g0 = tk_gwin_addr(L, &c->w, c->r0, c->c0);
    c->s0 = tk_smem_addr(L, c->st, c->base, c->r0, c->c0);
    LLVMValueRef rowstep = LLVMBuildMul(b, c->w.srow, tk_lw_i64c(L, (int64_t)c->dr * c->esz), "");
    c->gstep = rowstep;
}

/* Chunk of round k (an i32 value: the loop iv). */
static void chunk_at(tk_lower *L, copy *c, LLVMValueRef k, chunk *ch) {
    LLVMBuilderRef b = L->b;
    if (c->dr) {
        ch->r = LLVMBuildAdd(b, c->r0, LLVMBuildMul(b, k, i32c(L, c->dr), ""), "");
        ch->col = c->c0;
        LLVMValueRef k64 = tk_lw_to_i64(L, k);
        ch->g = tk_lw_gep(L, c->g0, LLVMBuildMul(b, k64, c->gstep, ""));
        if (tk_smem_row_shift_ok(c->st, c->dr)) {
            int64_t bytes = (int64_t)c->dr * tk_smem_row_step(c->st);
            ch->s = tk_lw_gep(L, c->s0, LLVMBuildMul(b, k, i32c(L, bytes), ""));
        } else {
            ch->s = tk_smem_addr(L, c->st, c->base, ch->r, ch->col);
        }
    } else {
        LLVMValueRef id = LLVMBuildAdd(b, L->ctid, LLVMBuildMul(b, k, i32c(L, c->nt), ""), "");
        ch->r = LLVMBuildUDiv(b, id, i32c(L, c->cpr), "");
        ch->col = LLVMBuildMul(b, LLVMBuildURem(b, id, i32c(L, c->cpr), ""), i32c(L, c->ce), "");
        ch->g = tk_gwin_addr(L, &c->w, ch->r, ch->col);
        ch->s = tk_smem_addr(L, c->st, c->base, ch->r, ch->col);
    }
    LLVMValueRef grow = LLVMBuildAdd(b, c->w.row0, tk_lw_to_i64(L, ch->r), "");
    ch->row_ok =
        LLVMBuildAnd(b, c->w.lead_ok, LLVMBuildICmp(b, LLVMIntULT, grow, c->w.rows, ""), "");
}

typedef void (*chunk_fn)(tk_lower *L, copy *c, const chunk *ch);

/* for (k = 0; k < rounds; k++) fn(chunk tid + k*NT), kept rolled: unrolled,
 * LICM would keep every round's addresses live across an enclosing k-loop.
 * Rounds that would run past the tile are guarded when NT does not divide
 * the chunk count. */
static void for_chunks(tk_lower *L, copy *c, chunk_fn fn) {
    LLVMBuilderRef b = L->b;
    tk_lw_loop lp = {.rolled = true};
    LLVMValueRef k = tk_lw_loop_begin(L, &lp, i32c(L, 0), i32c(L, c->rounds), i32c(L, 1));
    LLVMBasicBlockRef cont = NULL;
    if (c->total % c->nt) {
        LLVMValueRef id = LLVMBuildAdd(b, L->ctid, LLVMBuildMul(b, k, i32c(L, c->nt), ""), "");
        LLVMBasicBlockRef doit = tk_lw_block(L, "chunk");
        cont = tk_lw_block(L, "chunk.next");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, id, i32c(L, c->total), ""), doit, cont);
        LLVMPositionBuilderAtEnd(b, doit);
    }
    chunk ch;
    chunk_at(L, c, k, &ch);
    fn(L, c, &ch);
    if (cont) {
        LLVMBuildBr(b, cont);
        LLVMPositionBuilderAtEnd(b, cont);
    }
    tk_lw_loop_end(L, &lp);
}

/* ---- chunk bodies --------------------------------------------------------- */
static LLVMTypeRef chunk_ty(tk_lower *L) { return LLVMVectorType(L->i32, 4); }

/* The 16-byte accesses with an L2 policy (tk_param_set_cache): PTX's
 * .L2::cache_hint forms, which no intrinsic has. Addresses go in as i64. */
static LLVMValueRef addr64(tk_lower *L, LLVMValueRef p) {
    return LLVMBuildPtrToInt(L->b, p, L->i64, "");
}

/* cp.async of 16 bytes, `bytes` of them read (NULL: all 16). Never with the
 * policy: for sm_90 and sm_90a, ptxas 13.0 compiles a hinted full copy
 * (cp.async.cg...L2::cache_hint [s], [g], 16, policy) to an LDGSTS whose
 * shared base and policy descriptor are uniform registers nothing writes
 * (UR0, UR1 in the norms' SASS); on the H100 it raised "an illegal
 * instruction was encountered" (session 36, docs/PERF_NOTES.md round 32).
 * Triton dropped the same hint for the same ptxas defect. */
static void cp_async16(tk_lower *L, LLVMValueRef s, LLVMValueRef g, LLVMValueRef bytes) {
    LLVMValueRef a[3] = {s, g, bytes};
    tk_lw_intrin(L,
                 bytes ? "llvm.nvvm.cp.async.cg.shared.global.16.s"
                       : "llvm.nvvm.cp.async.cg.shared.global.16",
                 NULL, 0, a, bytes ? 3 : 2);
}

static LLVMValueRef ld_global16(tk_lower *L, const copy *c, LLVMValueRef g) {
    if (!c->l2) return tk_lw_load(L, chunk_ty(L), g, 16);
    LLVMTypeRef f[4] = {L->i32, L->i32, L->i32, L->i32};
    LLVMValueRef a[2] = {addr64(L, g), c->l2};
    LLVMValueRef r = tk_lw_asm(L, LLVMStructTypeInContext(L->c, f, 4, 0),
                               "ld.global.L2::cache_hint.v4.u32 {$0, $1, $2, $3}, [$4], $5;",
                               "=r,=r,=r,=r,l,l,~{memory}", a, 2, true);
    LLVMValueRef v = LLVMGetUndef(chunk_ty(L));
    for (unsigned i = 0; i < 4; i++)
        v = LLVMBuildInsertElement(L->b, v, LLVMBuildExtractValue(L->b, r, i, ""), i32c(L, i), "");
    return v;
}

static void st_global16(tk_lower *L, const copy *c, LLVMValueRef v, LLVMValueRef g) {
    if (!c->l2) {
        tk_lw_store(L, v, g, 16);
        return;
    }
    LLVMValueRef a[6] = {addr64(L, g)};
    for (unsigned i = 0; i < 4; i++) a[1 + i] = LLVMBuildExtractElement(L->b, v, i32c(L, i), "");
    a[5] = c->l2;
    tk_lw_asm(L, L->vd, "st.global.L2::cache_hint.v4.u32 [$0], {$1, $2, $3, $4}, $5;",
              "l,r,r,r,r,l,~{memory}", a, 6, true);
}

static void g2s_async_chunk(tk_lower *L, copy *c, const chunk *ch) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef gcol = LLVMBuildAdd(b, c->w.col0, tk_lw_to_i64(L, ch->col), "");
    LLVMValueRef left =
        LLVMBuildMul(b, LLVMBuildSub(b, c->w.cols, gcol, ""), tk_lw_i64c(L, c->esz), "");
    LLVMValueRef mm[2] = {left, tk_lw_i64c(L, 0)};
    left = tk_lw_intrin(L, "llvm.smax", &L->i64, 1, mm, 2);
    mm[0] = left, mm[1] = tk_lw_i64c(L, 16);
    left = tk_lw_intrin(L, "llvm.smin", &L->i64, 1, mm, 2);
    LLVMValueRef bytes = LLVMBuildSelect(b, ch->row_ok, tk_lw_to_i32(L, left), i32c(L, 0), "");
    LLVMValueRef any = LLVMBuildICmp(b, LLVMIntNE, bytes, i32c(L, 0), "");
    /* With src-size 0 nothing is read; still hand over a valid address. */
    LLVMValueRef src = LLVMBuildSelect(b, any, ch->g, tk_lw_sink(L), "");
    cp_async16(L, ch->s, src, bytes);
}

static void g2s_vec_chunk(tk_lower *L, copy *c, const chunk *ch) {
    tk_lw_store(L, ld_global16(L, c, ch->g), ch->s, 16);
}

static void s2g_vec_chunk(tk_lower *L, copy *c, const chunk *ch) {
    st_global16(L, c, tk_lw_load(L, chunk_ty(L), ch->s, 16), ch->g);
}

/* Element e of the chunk: global address, shared address, inside the view.
 * Called in a rolled loop over e, so nothing per-element stays live. */
static void chunk_elem(tk_lower *L, copy *c, const chunk *ch, LLVMValueRef e, LLVMValueRef *g,
                       LLVMValueRef *s, LLVMValueRef *ok) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef e64 = tk_lw_to_i64(L, e);
    *g = tk_lw_gep(L, ch->g, LLVMBuildMul(b, e64, c->escol, ""));
    *s = tk_lw_gep(L, ch->s, LLVMBuildMul(b, e, i32c(L, c->esz), ""));
    LLVMValueRef col =
        LLVMBuildAdd(b, tk_lw_to_i64(L, LLVMBuildAdd(b, ch->col, e, "")), c->w.col0, "");
    *ok = LLVMBuildAnd(b, ch->row_ok, LLVMBuildICmp(b, LLVMIntULT, col, c->w.cols, ""), "");
}

static void g2s_elem_chunk(tk_lower *L, copy *c, const chunk *ch) {
    tk_lw_loop lp = {.rolled = true};
    LLVMValueRef e = tk_lw_loop_begin(L, &lp, i32c(L, 0), i32c(L, c->ce), i32c(L, 1)), g, s, ok;
    chunk_elem(L, c, ch, e, &g, &s, &ok);
    LLVMValueRef x = tk_lw_load_masked(L, c->ety, g, ok, c->fill, (unsigned)c->esz);
    tk_lw_store(L, x, s, (unsigned)c->esz);
    tk_lw_loop_end(L, &lp);
}

static void s2g_elem_chunk(tk_lower *L, copy *c, const chunk *ch) {
    tk_lw_loop lp = {.rolled = true};
    LLVMValueRef e = tk_lw_loop_begin(L, &lp, i32c(L, 0), i32c(L, c->ce), i32c(L, 1)), g, s, ok;
    chunk_elem(L, c, ch, e, &g, &s, &ok);
    LLVMValueRef x = tk_lw_load(L, c->ety, s, (unsigned)c->esz);
    if (c->add)
        tk_lw_add_masked(L, x, g, ok);
    else
        tk_lw_store_masked(L, x, g, ok, (unsigned)c->esz);
    tk_lw_loop_end(L, &lp);
}

/* ---- G2S async, whole tile inside the view ---------------------------------
 * Unrolled: `rounds` is a compile-time constant (8 per 128x64 bf16 tile and
 * 128 threads). Addresses are split into a per-thread part that only depends
 * on tid and the view's row stride (loop-invariant: hoisted, a few registers)
 * and a block-uniform part (the tile origin), so nothing per round stays
 * live across an enclosing loop: round k's global address is round k-1's
 * plus one stride step, its shared address a constant offset from round 0's. */
static void g2s_async_full(tk_lower *L, void *ctx, LLVMValueRef *out) {
    copy *c = ctx;
    LLVMBuilderRef b = L->b;
    (void)out;
    /* unit column stride on this path: elements = row * srow + col */
    LLVMValueRef esz = tk_lw_i64c(L, c->esz);
    LLVMValueRef org =
        LLVMBuildAdd(b, c->w.base_off, LLVMBuildMul(b, c->w.row0, c->w.srow, ""), "");
    org = LLVMBuildMul(b, LLVMBuildAdd(b, org, c->w.col0, ""), esz, "");
    LLVMValueRef tile = tk_lw_gep(L, c->w.ptr, org); /* block-uniform */
    LLVMValueRef g = NULL, s0 = NULL;
    if (c->dr) {
        LLVMValueRef th = LLVMBuildMul(b, tk_lw_to_i64(L, c->r0), c->w.srow, "");
        th = LLVMBuildMul(b, LLVMBuildAdd(b, th, tk_lw_to_i64(L, c->c0), ""), esz, "");
        g = tk_lw_gep(L, tile, th);
        s0 = c->s0;
    }
    bool shift = c->dr && tk_smem_row_shift_ok(c->st, c->dr);
    for (int k = 0; k < c->rounds; k++) {
        LLVMBasicBlockRef cont = NULL;
        if ((k + 1) * c->nt > c->total) { /* the last, partial round */
            LLVMBasicBlockRef doit = tk_lw_block(L, "chunk");
            cont = tk_lw_block(L, "chunk.next");
            LLVMValueRef in =
                LLVMBuildICmp(b, LLVMIntULT, L->ctid, i32c(L, c->total - (int64_t)k * c->nt), "");
            LLVMBuildCondBr(b, in, doit, cont);
            LLVMPositionBuilderAtEnd(b, doit);
        }
        LLVMValueRef gk, sk;
        if (c->dr) {
            if (k) g = tk_lw_gep(L, g, c->gstep);
            gk = g;
            LLVMValueRef r = LLVMBuildAdd(b, c->r0, i32c(L, (int64_t)k * c->dr), "");
            sk = shift ? tk_lw_gep(L, s0, i32c(L, (int64_t)k * c->dr * tk_smem_row_step(c->st)))
                       : tk_smem_addr(L, c->st, c->base, r, c->c0);
        } else { /* chunks do not keep their column between rounds */
            LLVMValueRef id = LLVMBuildAdd(b, L->ctid, i32c(L, (int64_t)k * c->nt), "");
            LLVMValueRef r = LLVMBuildUDiv(b, id, i32c(L, c->cpr), "");
            LLVMValueRef col =
                LLVMBuildMul(b, LLVMBuildURem(b, id, i32c(L, c->cpr), ""), i32c(L, c->ce), "");
            LLVMValueRef th = LLVMBuildMul(b, tk_lw_to_i64(L, r), c->w.srow, "");
            th = LLVMBuildMul(b, LLVMBuildAdd(b, th, tk_lw_to_i64(L, col), ""), esz, "");
            gk = tk_lw_gep(L, tile, th);
            sk = tk_smem_addr(L, c->st, c->base, r, col);
        }
        cp_async16(L, sk, gk, NULL);
        if (cont) {
            LLVMBuildBr(b, cont);
            LLVMPositionBuilderAtEnd(b, cont);
        }
    }
}

/* ---- the two ops ----------------------------------------------------------- */
static void g2s_async(tk_lower *L, void *ctx, LLVMValueRef *out) {
    (void)out;
    for_chunks(L, ctx, g2s_async_chunk);
}
static void g2s_vec(tk_lower *L, void *ctx, LLVMValueRef *out) {
    (void)out;
    for_chunks(L, ctx, g2s_vec_chunk);
}
static void g2s_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    (void)out;
    for_chunks(L, ctx, g2s_elem_chunk);
}
/* The tile crosses an edge of the view (or is misaligned): per-chunk
 * src-size when the rows are aligned and col0 >= 0, else element by element. */
static void g2s_async_edge(tk_lower *L, void *ctx, LLVMValueRef *out) {
    copy *c = ctx;
    LLVMValueRef ok =
        LLVMBuildAnd(L->b, tk_gwin_aligned(L, &c->w, 16),
                     LLVMBuildICmp(L->b, LLVMIntSGE, c->w.col0, tk_lw_i64c(L, 0), ""), "");
    tk_lw_branch2(L, ok, g2s_async, g2s_slow, c, 0, out);
}
static void s2g_vec(tk_lower *L, void *ctx, LLVMValueRef *out) {
    (void)out;
    for_chunks(L, ctx, s2g_vec_chunk);
}
static void s2g_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    (void)out;
    for_chunks(L, ctx, s2g_elem_chunk);
}

/* Any async copy by cp.async: the unrolled fast path when the tile is
 * inside the view and aligned, else the edge paths. */
static void g2s_async_any(tk_lower *L, void *ctx, LLVMValueRef *out) {
    copy *c = ctx;
    LLVMValueRef aligned = tk_gwin_aligned(L, &c->w, 16);
    LLVMValueRef inb = tk_gwin_all_inb(L, &c->w, c->rows, c->cols);
    tk_lw_branch2(L, LLVMBuildAnd(L->b, aligned, inb, ""), g2s_async_full, g2s_async_edge, c, 0,
                  out);
}

/* smem operand `si`, view operand `vi`, its indices right after it. */
static bool copy_open(tk_lower *L, copy *c, const tk_op *op, int si, int vi) {
    const tk_type *st = &op->opnds[si]->type;
    tk_lv *sm = tk_lw_get(L, op->opnds[si]);
    if (!sm) return false;
    *c = (copy){.st = st,
                .base = sm->v[0],
                .rows = st->rows,
                .cols = st->cols,
                .esz = (int)tk_dtype_size(st->dtype),
                .nt = L->cnt,
                .ety = tk_lw_type(L, st->dtype)};
    c->ce = 16 / c->esz;
    c->cpr = c->cols / c->ce;
    c->total = c->rows * c->cpr;
    c->rounds = (c->total + c->nt - 1) / c->nt;
    c->fill = tk_lw_constf(L, st->dtype, op->fattr);
    tk_gwin_open(L, &c->w, op->opnds[vi], op->opnds + vi + 1, 2);
    c->l2 = tk_lw_l2_policy(L, op->opnds[vi]);
    c->escol = LLVMBuildMul(L->b, c->w.scol, tk_lw_i64c(L, c->esz), "");
    if (c->nt % c->cpr == 0) {
        c->dr = c->nt / c->cpr;
        affine_init(L, c);
    }
    return L->dg->st == TK_OK;
}

tk_status tk_lower_copy_g2s(tk_lower *L, const tk_op *op) {
    copy c;
    if (!copy_open(L, &c, op, 0, 1)) return L->dg->st;
    int map = tk_plan_copy_map(L->plan, op);
    if (map >= 0 && L->sync->role == TK_ROLE_CONSUMER)
        return L->dg->st; /* the producer's copy (ops/nv/sync.c) */
    if (map >= 0) {
        /* The producer warp's fallback stays rolled: unrolled over its 32
         * threads it would be many rounds of live addresses, in a warp that
         * gave its registers to the consumers. */
        tk_tma_copy(L, op, map, c.base,
                    L->sync->role == TK_ROLE_PRODUCER ? g2s_async_edge : g2s_async_any, &c);
    } else if (op->attr[0]) {
        g2s_async_any(L, &c, NULL);
    } else {
        LLVMValueRef aligned = tk_gwin_aligned(L, &c.w, 16);
        LLVMValueRef inb = tk_gwin_all_inb(L, &c.w, c.rows, c.cols);
        tk_lw_branch2(L, LLVMBuildAnd(L->b, aligned, inb, ""), g2s_vec, g2s_slow, &c, 0, NULL);
    }
    return L->dg->st;
}

/* Every thread's chunks; an add element by element (no vector atomics). */
static void s2g_threads(tk_lower *L, void *ctx, LLVMValueRef *out) {
    copy *c = ctx;
    if (c->add) {
        s2g_slow(L, c, out);
        return;
    }
    LLVMValueRef fast = LLVMBuildAnd(L->b, tk_gwin_aligned(L, &c->w, 16),
                                     tk_gwin_all_inb(L, &c->w, c->rows, c->cols), "");
    tk_lw_branch2(L, fast, s2g_vec, s2g_slow, c, 0, NULL);
}

/* The engine's store where the plan gave the copy a map (thread 0 issues
 * it), else every thread's chunks. */
tk_status tk_lower_copy_s2g(tk_lower *L, const tk_op *op) {
    copy c;
    if (!copy_open(L, &c, op, op->nopnds - 1, 0)) return L->dg->st;
    c.add = op->attr[0] != 0;
    int map = tk_plan_copy_map(L->plan, op);
    if (map >= 0)
        tk_tma_store(L, op, map, c.base, s2g_threads, &c);
    else
        s2g_threads(L, &c, NULL);
    return L->dg->st;
}
