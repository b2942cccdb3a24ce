/* Verifier tests: corrupt finished-looking IR by hand (through ir/ir.h)
 * and check that tk_kernel_finish's verifier catches what the builder
 * cannot, with the right tk_status and a precise message. */
#include <check.h>
#include <stdio.h>

#include "ir/ir.h"
#include "tk/tk.h"
#include "util/build.h"

/* ---- corrupted IR: what the verifier catches that the builder cannot ------- */
static tk_op *def_of(tk_value *v) { return v->def; }

START_TEST(corrupt_result_type) {
    tk_value *s = tk_add(k, f32t(16, 16), f32t(16, 16));
    s->type.dtype = TK_BF16;
    EXPECT_FINISH(TK_ERR_TYPE, "records its result as a 16x16 bf16 row tile (warp), but its type "
                               "rule gives a 16x16 f32 row tile (warp)");
    EXPECT(TK_ERR_TYPE, "tk_add (op #");
}
END_TEST

START_TEST(corrupt_use_before_def) {
    tk_value *a = ci(1), *b = ci(2), *s = tk_add(k, a, b);
    def_of(s)->opnds[1] = cf(1);
    EXPECT_FINISH(TK_ERR_STATE, "tk_add (op #3) uses %4 (operand 1) before it is defined");
}
END_TEST

START_TEST(corrupt_operand_type) {
    tk_value *a = ci(1), *f = cf(2), *s = tk_add(k, a, a);
    def_of(s)->opnds[1] = f;
    EXPECT_FINISH(TK_ERR_TYPE, "tk_add (op #3) fails its type rule: operands are a i32 and a f32");
}
END_TEST

START_TEST(corrupt_closed_use) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_value *in = tk_add(k, iv, iv);
    tk_for_end(k, 0, NULL, NULL);
    tk_value *out = tk_add(k, ci(5), ci(6));
    def_of(out)->opnds[0] = in;
    char frag[128];
    snprintf(frag, sizeof frag,
             "uses %%%u (operand 0), which is defined inside a region that is "
             "closed here",
             in->id);
    EXPECT_FINISH(TK_ERR_STATE, frag);
}
END_TEST

START_TEST(corrupt_yield_type) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), ci(4), ci(1), 1, &init, &c);
    tk_value *next = tk_add(k, c, ci(1));
    tk_for_end(k, 1, &next, &r);
    def_of(r)->regions[0]->yield[0] = tk_const_i64(k, 1);
    EXPECT_FINISH(TK_ERR_TYPE, "tk_for_begin (op #5) has body yield 0 of type i64, expected i32");
}
END_TEST

START_TEST(corrupt_yield_later) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), ci(4), ci(1), 1, &init, &c);
    tk_for_end(k, 1, &c, &r);
    def_of(r)->regions[0]->yield[0] = ci(9); /* defined after the loop */
    EXPECT_FINISH(TK_ERR_STATE, "(body yield 0) before it is defined");
}
END_TEST

START_TEST(corrupt_shared_offset) {
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PAD, 1);
    def_of(s)->attr[0] = 64;
    EXPECT_FINISH(TK_ERR_STATE, "tk_shared (op #2) records shared offset 64, but allocation order "
                                "gives 1024");
}
END_TEST

START_TEST(corrupt_smem_total) {
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    k->smem_bytes = 10;
    EXPECT_FINISH(TK_ERR_STATE, "the kernel records 10 bytes of shared memory, its shared tiles "
                                "take 1024");
}
END_TEST

START_TEST(corrupt_scope) {
    tk_value *t = f32t(16, 16);
    def_of(t)->scope = TK_SCOPE_THREAD;
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_fill (op #2) records scope thread, but its table row and "
                                "operands give warp");
}
END_TEST

START_TEST(corrupt_uniformity) {
    tk_value *l = tk_lane_id(k), *x = tk_add(k, l, ci(1));
    x->uni = TK_UNI_BLOCK;
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_add (op #3) marks %3 as block-uniform, but its inputs make it "
                                "per-thread");
}
END_TEST

START_TEST(corrupt_operand_count) {
    tk_value *x = tk_neg(k, ci(1));
    def_of(x)->nopnds = 0;
    EXPECT_FINISH(TK_ERR_STATE, "tk_neg (op #2) has 0 operands, expected 1..1");
}
END_TEST

START_TEST(corrupt_opcode) {
    tk_value *x = tk_neg(k, ci(1));
    def_of(x)->opc = TK_OP_COUNT;
    EXPECT_FINISH(TK_ERR_STATE, "op #2 has opcode");
}
END_TEST

START_TEST(corrupt_cycle) {
    tk_value *a = ci(1);
    ci(2);
    def_of(a)->next = def_of(a); /* the list now loops on op #1 */
    EXPECT_FINISH(TK_ERR_STATE, "tk_const (op #1) defines %1 (result 0) a second time");
}
END_TEST

START_TEST(corrupt_grid_inner) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_for_end(k, 0, NULL, NULL);
    k->grid[0] = iv;
    EXPECT_FINISH(TK_ERR_STATE, "grid dimension 0 is not a top-level value of this kernel");
}
END_TEST

START_TEST(corrupt_if_region) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_if_end(k, 0, NULL, NULL);
    k->body->last->regions[1] = NULL;
    EXPECT_FINISH(TK_ERR_STATE, "tk_if_begin (op #2) lacks a region");
}
END_TEST

/* The verifier still catches a handle yielded behind the builder's back. */
START_TEST(corrupt_if_yields_memory) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1), *x = ci(1), *r;
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_else(k, 1, &x);
    tk_if_end(k, 1, &x, &r);
    r->type = s->type;
    EXPECT_FINISH(TK_ERR_TYPE, "tk_if_begin (op #4) yields a memory handle");
}
END_TEST

/* ... and a grid set behind tk_set_grid's back. */
START_TEST(corrupt_grid_lane) {
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    k->grid[1] = tk_max(k, n, tk_lane_id(k));
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_kernel_finish: the grid depends on op #1 (lane_id), which "
                                "the host cannot evaluate");
}
END_TEST

/* ---- suite ---------------------------------------------------------------------- */
static Suite *verify_suite(void) {
    Suite *s = suite_create("verify");
    const TTest *corrupt[] = {
        corrupt_result_type,   corrupt_use_before_def,
        corrupt_operand_type,  corrupt_closed_use,
        corrupt_yield_type,    corrupt_yield_later,
        corrupt_shared_offset, corrupt_smem_total,
        corrupt_scope,         corrupt_uniformity,
        corrupt_operand_count, corrupt_opcode,
        corrupt_cycle,         corrupt_grid_inner,
        corrupt_if_region,     corrupt_if_yields_memory,
        corrupt_grid_lane,
    };
    build_tcase(s, "corrupt_ir", corrupt, sizeof corrupt / sizeof *corrupt);
    return s;
}

int main(void) { return run_suite(verify_suite()); }
