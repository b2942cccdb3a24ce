/* The interpreter's race checker: the model is described in ops/race.h.
 *
 * Every tracked element has a cell: its last writer and up to two readers
 * (the first, and the first other agent) in the current epoch, plus a set
 * of every reader agent. A cell whose epoch is older than the current one
 * is empty, so a barrier costs one increment. Shared memory has one cell
 * per float (and an in-flight async copy per float, which survives
 * barriers); global elements live in an open-addressed table keyed by their
 * address (two arguments over one buffer share cells), whose stale slots
 * count as free. */
#include "ops/race.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cell {
    const tk_op *w, *r[2]; /* last writer, first two reading agents' ops */
    uint64_t readers;      /* agent bits                                 */
    uint32_t epoch;
    int8_t wag, rag[2]; /* their agents, -1: none                     */
} cell;

typedef struct gcell {
    uintptr_t addr;
    int param;
    cell c;
} gcell;

typedef struct shared_buf {
    const tk_op *op;
    size_t off, stage_n; /* float offset; floats per stage             */
    int rows, cols, count;
} shared_buf;

/* A warpgroup's multiply whose shared reads are pending (not yet retired
 * by a wait): its op and up to two float ranges. */
typedef struct wg_group {
    const tk_op *op;
    size_t off[2], n[2];
    int nr;
} wg_group;

#define WG_MAX    8  /* warpgroups per block (32 warps)                  */
#define WG_GROUPS 16 /* pending groups tracked per warpgroup              */

struct tk_race {
    uint32_t epoch;                     /* >= 1; cells of epoch 0 were never touched  */
    size_t n;                           /* shared floats per block                    */
    cell *sm;                           /* n cells                                    */
    const tk_op **flight;               /* n: the async copy in flight, or NULL       */
    uint16_t *reading;                  /* n: pending multiplies reading the float     */
    wg_group groups[WG_MAX][WG_GROUPS]; /* per warpgroup, oldest first   */
    int ngroups[WG_MAX];
    shared_buf *bufs;
    int nbufs;
    gcell *g; /* global table: cap slots, ng in this epoch  */
    size_t gcap, ng;
};

/* ---- names for messages ---------------------------------------------------- */
/* The public builder call that makes an op (the memory ops share calls). */
static const char *call_name(const tk_op *op, char *buf, size_t n) {
    switch (op->opc) {
    case TK_OP_LOAD_G2R:
    case TK_OP_LOAD_S2R: return "tk_load";
    case TK_OP_STORE_R2G: return op->attr[0] ? "tk_store_add" : "tk_store";
    case TK_OP_STORE_R2S: return "tk_store";
    case TK_OP_COPY_G2S: return "tk_copy_to_shared";
    case TK_OP_COPY_S2G: return op->attr[0] ? "tk_copy_to_global_add" : "tk_copy_to_global";
    default: snprintf(buf, n, "tk_%s", tk_op_infos[op->opc].name); return buf;
    }
}

static void agent_str(int a, char *buf, size_t n) {
    if (a == TK_RACE_BLOCK)
        snprintf(buf, n, "the block");
    else if (a >= TK_RACE_WG)
        snprintf(buf, n, "warpgroup %d", a - TK_RACE_WG);
    else
        snprintf(buf, n, "warp %d", a);
}

/* "sA stage 1 element (3, 5)" for a shared float offset. */
static void smem_str(const tk_race *R, size_t off, char *buf, size_t n) {
    for (int i = 0; i < R->nbufs; i++) {
        const shared_buf *b = &R->bufs[i];
        if (off < b->off || off >= b->off + b->stage_n * (size_t)b->count) continue;
        size_t in = off - b->off, e = in % b->stage_n;
        const tk_value *v = b->op->res[0];
        char nm[64];
        if (v->name)
            snprintf(nm, sizeof nm, "%s", v->name);
        else
            snprintf(nm, sizeof nm, "shared tile %%%u", v->id);
        snprintf(buf, n, "%s stage %zu element (%zu, %zu)", nm, in / b->stage_n,
                 e / (size_t)b->cols, e % (size_t)b->cols);
        return;
    }
    snprintf(buf, n, "shared float %zu", off);
}

static void global_str(const tk_interp *I, int p, uintptr_t addr, char *buf, size_t n) {
    const tk_arg *a = &I->args[p];
    long long e =
        (long long)((intptr_t)(addr - (uintptr_t)a->data) / (intptr_t)tk_dtype_size(a->dtype));
    snprintf(buf, n, "tensor '%s' (argument %d) element offset %lld", I->k->params[p]->name, p, e);
}

/* ---- the conflict rule ------------------------------------------------------ */
static bool clash(const tk_interp *I, int a, int b) {
    if (I->warps == 1 || a < 0 || b < 0) return false;
    return a == TK_RACE_BLOCK || b == TK_RACE_BLOCK || a != b;
}

static uint64_t bit(int a) { return UINT64_C(1) << a; }

/* Did some reader other than agent a read the cell? Its index in r[], or -1. */
static int clashing_reader(const tk_interp *I, const cell *c, int a) {
    if (!c->readers || I->warps == 1) return -1;
    for (int i = 0; i < 2; i++)
        if (clash(I, a, c->rag[i])) return i;
    return -1;
}

/* A conflicting earlier access found by check(). */
typedef struct prior {
    const tk_op *op;
    int agent;
    const char *verb; /* "wrote" / "read" */
} prior;

static tk_status report(tk_interp *I, const tk_op *op, int a, bool write, const char *what,
                        const prior *p) {
    char ag[32], pag[32], c1[64], c2[64];
    agent_str(a, ag, sizeof ag);
    agent_str(p->agent, pag, sizeof pag);
    return tk_interp_fail(I, NULL, -1, TK_ERR_RUNTIME,
                          "race: %s %s %s (op #%u, %s) after %s "
                          "%s it (op #%u, %s) with no barrier between",
                          ag, write ? "writes" : "reads", what, op->id,
                          call_name(op, c1, sizeof c1), pag, p->verb, p->op->id,
                          call_name(p->op, c2, sizeof c2));
}

static void fresh(cell *c, uint32_t epoch) {
    *c = (cell){.epoch = epoch, .wag = -1, .rag = {-1, -1}};
}

/* A tk_store_add or tk_copy_to_global_add: adds by different agents
 * commute, so they never clash with each other; a read or a plain store
 * next to one does. */
static bool adds(const tk_op *op) {
    return op && (op->opc == TK_OP_STORE_R2G || op->opc == TK_OP_COPY_S2G) && op->attr[0];
}

/* Does an access by agent a (with op) clash with what cell c saw this
 * epoch? */
static bool check(const tk_interp *I, const cell *c, const tk_op *op, int a, bool write, prior *p) {
    if (c->epoch != I->race->epoch) return false;
    if (c->w && clash(I, a, c->wag) && !(adds(op) && adds(c->w))) {
        *p = (prior){c->w, c->wag, "wrote"};
        return true;
    }
    int i = write ? clashing_reader(I, c, a) : -1;
    if (i >= 0) *p = (prior){c->r[i], c->rag[i], "read"};
    return i >= 0;
}

static void record(const tk_interp *I, cell *c, const tk_op *op, int a, bool write) {
    if (c->epoch != I->race->epoch) fresh(c, I->race->epoch);
    if (write) {
        /* adds by two agents: any later access but another add clashes */
        bool shared = adds(op) && adds(c->w) && clash(I, a, c->wag);
        c->w = op;
        c->wag = (int8_t)(shared ? TK_RACE_BLOCK : a);
        return;
    }
    if (c->rag[0] < 0)
        c->r[0] = op, c->rag[0] = (int8_t)a;
    else if (c->rag[1] < 0 && c->rag[0] != a)
        c->r[1] = op, c->rag[1] = (int8_t)a;
    c->readers |= bit(a);
}

/* ---- shared memory ---------------------------------------------------------- */
static tk_status in_flight(tk_interp *I, const tk_op *op, int a, size_t off, bool write) {
    char ag[32], what[160], c1[64], c2[64];
    const tk_op *cp = I->race->flight[off];
    agent_str(a, ag, sizeof ag);
    smem_str(I->race, off, what, sizeof what);
    return tk_interp_fail(I, NULL, -1, TK_ERR_RUNTIME,
                          "race: %s %s %s (op #%u, %s) while the "
                          "async copy into it (op #%u, %s) is still in flight (no tk_async_wait "
                          "has retired its group)",
                          ag, write ? "writes" : "reads", what, op->id,
                          call_name(op, c1, sizeof c1), cp->id, call_name(cp, c2, sizeof c2));
}

/* The pending multiply that reads shared float off. */
static const wg_group *reader_of(const tk_race *R, size_t off, int *wg) {
    for (int g = 0; g < WG_MAX; g++)
        for (int j = 0; j < R->ngroups[g]; j++) {
            const wg_group *x = &R->groups[g][j];
            for (int r = 0; r < x->nr; r++)
                if (off >= x->off[r] && off - x->off[r] < x->n[r]) return *wg = g, x;
        }
    return NULL;
}

static tk_status still_read(tk_interp *I, const tk_op *op, int a, size_t off) {
    char ag[32], what[160], c1[64];
    int wg = 0;
    const wg_group *x = reader_of(I->race, off, &wg);
    agent_str(a, ag, sizeof ag);
    smem_str(I->race, off, what, sizeof what);
    return tk_interp_fail(I, NULL, -1, TK_ERR_RUNTIME,
                          "race: %s writes %s (op #%u, %s) while warpgroup %d's tk_wgmma "
                          "(op #%u) still reads it (no tk_wgmma_wait has retired its group)",
                          ag, what, op->id, call_name(op, c1, sizeof c1), wg, x ? x->op->id : 0);
}

tk_status tk_race_smem(tk_interp *I, const tk_op *op, int agent, size_t off, size_t n,
                       tk_race_kind kind) {
    tk_race *R = I->race;
    bool write = kind != TK_RACE_READ;
    prior p;
    for (size_t i = off; i < off + n && i < R->n; i++) {
        if (R->flight[i]) return in_flight(I, op, agent, i, write);
        if (write && R->reading[i]) return still_read(I, op, agent, i);
        if (check(I, &R->sm[i], op, agent, write, &p)) {
            char what[160];
            smem_str(R, i, what, sizeof what);
            return report(I, op, agent, write, what, &p);
        }
        /* An issued async copy writes when it lands (tk_race_landed). */
        if (kind == TK_RACE_ISSUE)
            R->flight[i] = op;
        else
            record(I, &R->sm[i], op, agent, write);
    }
    return TK_OK;
}

void tk_race_landed(tk_interp *I, const tk_op *op, size_t off, size_t n) {
    tk_race *R = I->race;
    for (size_t i = off; i < off + n && i < R->n; i++) {
        R->flight[i] = NULL;
        record(I, &R->sm[i], op, TK_RACE_BLOCK, true);
    }
}

static void count_reads(tk_race *R, const wg_group *x, int d) {
    for (int r = 0; r < x->nr; r++)
        for (size_t i = x->off[r]; i < x->off[r] + x->n[r] && i < R->n; i++)
            R->reading[i] = (uint16_t)(R->reading[i] + d);
}

tk_status tk_race_wgmma_issue(tk_interp *I, const tk_op *op, int wg, const size_t *off,
                              const size_t *n, int nr) {
    tk_race *R = I->race;
    for (int r = 0; r < nr; r++) {
        tk_status s = tk_race_smem(I, op, TK_RACE_WG + wg, off[r], n[r], TK_RACE_READ);
        if (s) return s;
    }
    if (wg >= WG_MAX) return TK_OK;
    if (R->ngroups[wg] == WG_GROUPS)
        return tk_interp_fail(I, op, 4 * wg, TK_ERR_RUNTIME,
                              "more than %d tk_wgmma groups in flight in warpgroup %d (a "
                              "tk_wgmma_wait is missing)",
                              WG_GROUPS, wg);
    wg_group *x = &R->groups[wg][R->ngroups[wg]++];
    *x = (wg_group){.op = op, .nr = nr};
    for (int r = 0; r < nr && r < 2; r++) x->off[r] = off[r], x->n[r] = n[r];
    count_reads(R, x, 1);
    return TK_OK;
}

void tk_race_wgmma_wait(tk_interp *I, int wg, int keep) {
    tk_race *R = I->race;
    if (wg >= WG_MAX || R->ngroups[wg] <= keep) return;
    int done = R->ngroups[wg] - keep;
    for (int j = 0; j < done; j++) count_reads(R, &R->groups[wg][j], -1);
    memmove(R->groups[wg], R->groups[wg] + done, (size_t)keep * sizeof(wg_group));
    R->ngroups[wg] = keep;
}

/* ---- global memory ---------------------------------------------------------- */
static size_t hash(uintptr_t a) {
    uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17);
}

/* Slot of addr in the table (live for this epoch), or the free slot it goes to. */
static gcell *gslot(tk_race *R, uintptr_t addr) {
    for (size_t i = hash(addr) & (R->gcap - 1);; i = (i + 1) & (R->gcap - 1)) {
        gcell *g = &R->g[i];
        if (g->c.epoch != R->epoch || g->addr == addr) return g;
    }
}

static tk_status grow(tk_interp *I) {
    tk_race *R = I->race;
    size_t cap = R->gcap ? 2 * R->gcap : 1024;
    gcell *old = R->g, *g = calloc(cap, sizeof *g);
    if (!g) return tk_interp_fail(I, NULL, -1, TK_ERR_NO_MEMORY, "out of memory (race check)");
    size_t oldcap = R->gcap;
    R->g = g;
    R->gcap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].c.epoch == R->epoch) *gslot(R, old[i].addr) = old[i];
    free(old);
    return TK_OK;
}

tk_status tk_race_global(tk_interp *I, const tk_op *op, int agent, int param, int64_t off,
                         bool write) {
    tk_race *R = I->race;
    if (I->warps == 1) return TK_OK; /* one agent (or the block) cannot race with itself */
    if (2 * (R->ng + 1) > R->gcap) {
        tk_status s = grow(I);
        if (s) return s;
    }
    const tk_arg *a = &I->args[param];
    uintptr_t addr = (uintptr_t)a->data + (uintptr_t)(off * (int64_t)tk_dtype_size(a->dtype));
    gcell *g = gslot(R, addr);
    if (g->c.epoch != R->epoch) {
        *g = (gcell){.addr = addr, .param = param};
        fresh(&g->c, R->epoch);
        R->ng++;
    }
    prior p;
    if (check(I, &g->c, op, agent, write, &p)) {
        char what[160];
        global_str(I, g->param, addr, what, sizeof what);
        return report(I, op, agent, write, what, &p);
    }
    record(I, &g->c, op, agent, write);
    return TK_OK;
}

/* ---- lifetime ----------------------------------------------------------------- */
static void next_epoch(tk_race *R) {
    R->ng = 0;
    if (++R->epoch) return;
    /* Wrapped after 2^32 barriers: old cells could look current. */
    memset(R->sm, 0, R->n * sizeof *R->sm);
    memset(R->g, 0, R->gcap * sizeof *R->g);
    R->epoch = 1;
}

void tk_race_barrier(tk_interp *I) { next_epoch(I->race); }

void tk_race_block(tk_interp *I) {
    tk_race *R = I->race;
    memset(R->flight, 0, R->n * sizeof *R->flight);
    memset(R->reading, 0, R->n * sizeof *R->reading);
    memset(R->ngroups, 0, sizeof R->ngroups);
    tk_race_barrier(I);
}

tk_status tk_race_init(tk_interp *I) {
    tk_race *R = calloc(1, sizeof *R);
    int nbufs = 0;
    TK_FOREACH_OP(I->k->body, op) nbufs += op->opc == TK_OP_SHARED;
    if (R) {
        R->sm = calloc(I->smem_n ? I->smem_n : 1, sizeof *R->sm);
        R->flight = calloc(I->smem_n ? I->smem_n : 1, sizeof *R->flight);
        R->reading = calloc(I->smem_n ? I->smem_n : 1, sizeof *R->reading);
        R->bufs = calloc(nbufs ? (size_t)nbufs : 1, sizeof *R->bufs);
    }
    I->race = R;
    if (R) R->n = I->smem_n;
    if (!R || !R->sm || !R->flight || !R->reading || !R->bufs)
        return tk_interp_fail(I, NULL, -1, TK_ERR_NO_MEMORY, "out of memory (race check)");
    size_t off = 0; /* SHARED ops run in this order, each bumping the offset */
    TK_FOREACH_OP(I->k->body, op) {
        if (op->opc != TK_OP_SHARED) continue;
        const tk_type *t = &op->res[0]->type;
        size_t sn = (size_t)t->rows * (size_t)t->cols;
        R->bufs[R->nbufs++] = (shared_buf){op, off, sn, t->rows, t->cols, t->count};
        off += sn * (size_t)t->count;
    }
    R->epoch = 1;
    return TK_OK;
}

void tk_race_free(tk_interp *I) {
    tk_race *R = I->race;
    if (!R) return;
    free(R->sm);
    free(R->flight);
    free(R->reading);
    free(R->bufs);
    free(R->g);
    free(R);
    I->race = NULL;
}
