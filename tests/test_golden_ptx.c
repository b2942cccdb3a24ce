/* Golden PTX ("process replay"): the PTX of every shipped kernel variant, on
 * sm_80, sm_90 and sm_90a, against digests committed in tests/golden/ptx.txt.
 *
 * Any change to the code generator shows up here as a list of variants whose
 * PTX changed: a refactor proves itself by changing none, and a codegen
 * change is accepted on purpose with
 *     TK_UPDATE_GOLDEN=1 ./build/test_golden_ptx
 * `scripts/ptx-diff.sh [REV]` prints the PTX diff itself against REV.
 * TK_PTX_DUMP=DIR writes every variant's PTX to DIR/<variant>.<arch>.ptx.
 *
 * The digests depend on the LLVM version: under another version than the
 * one recorded in the golden file the comparison is skipped with a line. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "util/run.h"

#ifndef TK_LLVM_VERSION
#define TK_LLVM_VERSION "?"
#endif

/* ---- The variants ------------------------------------------------------------ */
typedef struct variant {
    char name[64];
    const char *arch;
    int is_gemm, is_bwd, is_dec;
    tk_gemm_config g;
    tk_attention_config a;
    tk_attention_bwd_config b;
    tk_attention_decode_config dc;
    int is_norm;
    tk_norm_config nc;
    int is_rot;
    tk_rotary_config rc;
    int is_based;
    tk_based_config bc;
    int is_hh;
    tk_hedgehog_config hc;
    int is_adamw;
    tk_adamw_config ac;
    int is_xent;
    tk_xent_config xc;
    int is_emb;
    tk_embedding_config ec;
    int is_bias;
    tk_bias_grad_config bgc;
} variant;

enum { MAX_VARIANTS = 700 };

static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};

/* The GEMM's epilogues and transposed A (tk_gemm_config's fields after
 * wgmma) on the shapes that run them: the default mma.sync block, the
 * producer-fed 128x256 one, and the wgmma kernel's three (sm_90a). */
static int gemm_epilogue_variants(variant *v, const char *arch) {
    static const struct {
        const char *name;
        int bm, bn, bk, w, st, tma, wgmma;
        tk_dtype in, out;
        int ta, tb, bias, act, aux, acc;
    } eps[] = {
        {"atb", 128, 128, 64, 4, 3, 0, 0, TK_BF16, TK_BF16, 1, 0, 0, 0, 0, 0},
        {"atbt_f32", 128, 128, 64, 4, 3, 0, 0, TK_F16, TK_F32, 1, 1, 0, 0, 0, 0},
        {"bias_gelu_aux", 128, 128, 64, 4, 3, 0, 0, TK_BF16, TK_BF16, 0, 0, 1, 1, 1, 0},
        {"abt_dgelu", 128, 128, 64, 4, 3, 0, 0, TK_BF16, TK_BF16, 0, 1, 0, 2, 1, 0},
        {"atb_acc_f32", 128, 128, 64, 4, 3, 0, 0, TK_BF16, TK_F32, 1, 0, 0, 0, 0, 1},
        {"bias_acc", 128, 128, 64, 4, 3, 0, 0, TK_BF16, TK_BF16, 0, 0, 1, 0, 0, 1},
        {"bias_gelu_aux", 128, 256, 128, 8, 2, 1, 0, TK_BF16, TK_BF16, 0, 0, 1, 1, 1, 0},
        {"atb_acc_f32", 128, 256, 128, 8, 2, 1, 0, TK_BF16, TK_F32, 1, 0, 0, 0, 0, 1},
        {"atb", 128, 256, 64, 8, 4, 1, 1, TK_BF16, TK_BF16, 1, 0, 0, 0, 0, 0},
        {"bias_gelu_aux", 128, 256, 64, 8, 4, 1, 1, TK_BF16, TK_BF16, 0, 0, 1, 1, 1, 0},
        {"bias_gelu", 128, 256, 64, 8, 4, 1, 1, TK_BF16, TK_BF16, 0, 0, 1, 1, 0, 0},
        {"abt_dgelu", 128, 256, 64, 8, 4, 1, 1, TK_BF16, TK_BF16, 0, 1, 0, 2, 1, 0},
        {"bias", 128, 256, 64, 8, 4, 1, 1, TK_BF16, TK_BF16, 0, 0, 1, 0, 0, 0},
        {"atb_acc_f32", 128, 128, 64, 8, 6, 1, 1, TK_BF16, TK_F32, 1, 0, 0, 0, 0, 1},
        {"atb_acc", 128, 128, 64, 8, 6, 1, 1, TK_BF16, TK_BF16, 1, 0, 0, 0, 0, 1},
        {"bias_gelu_aux", 128, 128, 64, 8, 6, 1, 1, TK_BF16, TK_BF16, 0, 0, 1, 1, 1, 0},
        {"atbt_bias", 64, 128, 32, 4, 3, 0, 1, TK_F16, TK_F16, 1, 1, 1, 0, 0, 0},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) {
        if (eps[i].wgmma && strcmp(arch, "sm_90a")) continue;
        variant *x = &v[n++];
        x->arch = arch;
        x->is_gemm = 1;
        x->g = tk_gemm_default_config(eps[i].in, eps[i].out, eps[i].tb);
        x->g.block_m = eps[i].bm, x->g.block_n = eps[i].bn, x->g.block_k = eps[i].bk;
        x->g.warps = eps[i].w, x->g.stages = eps[i].st, x->g.tma = eps[i].tma;
        x->g.wgmma = eps[i].wgmma, x->g.transpose_a = eps[i].ta, x->g.bias = eps[i].bias;
        x->g.act = eps[i].act, x->g.aux = eps[i].aux, x->g.accumulate = eps[i].acc;
        snprintf(x->name, sizeof x->name, "gemm_ep_%s_%s_%s_%dx%dx%d_w%d_s%d%s%s",
                 tk_dtype_name(eps[i].in), tk_dtype_name(eps[i].out), eps[i].name, eps[i].bm,
                 eps[i].bn, eps[i].bk, eps[i].w, eps[i].st, eps[i].tma ? "_tma" : "",
                 eps[i].wgmma ? "_wgmma" : "");
    }
    return n;
}

/* The split over K (tk_gemm_config.split_k): kernel 1 on the block shapes
 * the split picks (the weight gradient's Aᵀ·B into f32 partials), kernel 2
 * with the epilogues it applies. */
static int gemm_split_variants(variant *v, const char *arch) {
    static const struct {
        const char *name;
        int bm, bn, st, wgmma, reduce;
        tk_dtype out;
        int bias, act, aux, acc;
    } sp[] = {
        {"atb", 128, 128, 3, 0, 0, TK_F32, 0, 0, 0, 0},
        {"atb", 128, 64, 3, 0, 0, TK_F32, 0, 0, 0, 0},
        {"atb", 128, 256, 4, 1, 0, TK_F32, 0, 0, 0, 0},
        {"atb", 128, 128, 6, 1, 0, TK_F32, 0, 0, 0, 0},
        {"reduce", 0, 0, 0, 0, 1, TK_F32, 0, 0, 0, 0},
        {"reduce_acc", 0, 0, 0, 0, 1, TK_BF16, 0, 0, 0, 1},
        {"reduce_bias_gelu_aux", 0, 0, 0, 0, 1, TK_BF16, 1, 1, 1, 0},
        {"reduce_dgelu", 0, 0, 0, 0, 1, TK_F16, 0, 2, 1, 0},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        if (sp[i].wgmma && strcmp(arch, "sm_90a")) continue;
        variant *x = &v[n++];
        x->arch = arch;
        x->is_gemm = 1;
        x->g = tk_gemm_default_config(TK_BF16, sp[i].out, 0);
        if (sp[i].bm) x->g.block_m = sp[i].bm, x->g.block_n = sp[i].bn, x->g.stages = sp[i].st;
        if (sp[i].wgmma) x->g.warps = 8, x->g.tma = 1, x->g.wgmma = 1;
        x->g.transpose_a = !sp[i].reduce, x->g.split_k = 4, x->g.split_reduce = sp[i].reduce;
        x->g.bias = sp[i].bias, x->g.act = sp[i].act, x->g.aux = sp[i].aux;
        x->g.accumulate = sp[i].acc;
        if (sp[i].reduce)
            snprintf(x->name, sizeof x->name, "gemm_split_%s_%s", sp[i].name,
                     tk_dtype_name(sp[i].out));
        else
            snprintf(x->name, sizeof x->name, "gemm_split_%s_%dx%dx64_s%d%s", sp[i].name, sp[i].bm,
                     sp[i].bn, sp[i].st, sp[i].wgmma ? "_wgmma" : "");
    }
    return n;
}

/* The embeddings (GPT-2's: bf16, rows of 768 as one 16 x 48 tile; the f32
 * weights' forward at 64 columns, no positions) and every kernel of the
 * backward's sort and sums; the bias gradient's two kernels. */
static int train_variants(variant *v, const char *arch) {
    static const struct {
        const char *name;
        tk_embedding_config c;
    } embs[] = {
        {"emb_fwd_bf16_pos_c48", {TK_EMB_FWD, TK_BF16, TK_BF16, 1, 48, 0}},
        {"emb_fwd_f32_bf16_c64", {TK_EMB_FWD, TK_BF16, TK_F32, 0, 64, 0}},
        {"emb_zero", {TK_EMB_ZERO, TK_DT_NONE, TK_DT_NONE, 0, 0, 0}},
        {"emb_dwpe_bf16", {TK_EMB_DWPE, TK_BF16, TK_DT_NONE, 0, 0, 0}},
        {"emb_keys", {TK_EMB_KEYS, TK_DT_NONE, TK_DT_NONE, 0, 0, 0}},
        {"emb_hist", {TK_EMB_HIST, TK_DT_NONE, TK_DT_NONE, 0, 0, 0}},
        {"emb_scan", {TK_EMB_SCAN, TK_DT_NONE, TK_DT_NONE, 0, 0, 0}},
        {"emb_scatter", {TK_EMB_SCATTER, TK_DT_NONE, TK_DT_NONE, 0, 0, 0}},
        {"emb_segsum_bf16_c48", {TK_EMB_SEGSUM, TK_BF16, TK_DT_NONE, 0, 48, 0}},
        {"emb_fixup_c48", {TK_EMB_FIXUP, TK_DT_NONE, TK_DT_NONE, 0, 48, 0}},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof embs / sizeof embs[0]; i++) {
        variant *x = &v[n++];
        x->arch = arch;
        x->is_emb = 1;
        x->ec = embs[i].c;
        snprintf(x->name, sizeof x->name, "%s", embs[i].name);
    }
    static const tk_bias_grad_config biases[] = {{TK_BIAS_GRAD_PARTIAL, TK_BF16, 0},
                                                 {TK_BIAS_GRAD_REDUCE, TK_DT_NONE, 0}};
    for (int i = 0; i < 2; i++) {
        variant *x = &v[n++];
        x->arch = arch;
        x->is_bias = 1;
        x->bgc = biases[i];
        snprintf(x->name, sizeof x->name, "bias_grad_%s", i ? "reduce" : "partial_bf16");
    }
    return n;
}

/* Every GEMM block shape the library picks (tk_gemm_config_for) or the
 * benchmarks name, each over dtype/transpose combinations that exercise the
 * three store paths; every attention specialization, forward and backward. */
static int make_variants(variant *v) {
    static const struct {
        int bm, bn, bk, w, st, tma, wgmma;
    } shapes[] = {
        {128, 128, 64, 4, 3, 0, 0},
        {128, 64, 64, 4, 3, 0, 0},
        {128, 256, 64, 8, 3, 0, 0},
        {128, 256, 128, 8, 2, 1, 0},
        {128, 256, 64, 8, 3, 1, 0},
        {128, 128, 64, 4, 3, 1, 0},
        /* wgmma (sm_90a only): producer + two warpgroups, lockstep, one warpgroup */
        {128, 256, 64, 8, 4, 1, 1},
        {128, 256, 64, 8, 4, 0, 1},
        {128, 128, 64, 8, 6, 1, 1},
        {64, 128, 32, 4, 3, 0, 1},
    };
    static const struct {
        tk_dtype in, out;
        int tb;
    } dts[] = {
        {TK_BF16, TK_BF16, 0},
        {TK_BF16, TK_BF16, 1},
        {TK_F16, TK_F32, 0},
        {TK_F16, TK_F16, 1},
    };
    int n = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
                if (shapes[s].wgmma && strcmp(archs[a], "sm_90a")) continue;
                variant *x = &v[n++];
                x->arch = archs[a];
                x->is_gemm = 1;
                x->g = tk_gemm_default_config(dts[d].in, dts[d].out, dts[d].tb);
                x->g.block_m = shapes[s].bm;
                x->g.block_n = shapes[s].bn;
                x->g.block_k = shapes[s].bk;
                x->g.warps = shapes[s].w;
                x->g.stages = shapes[s].st;
                x->g.tma = shapes[s].tma;
                x->g.wgmma = shapes[s].wgmma;
                snprintf(x->name, sizeof x->name, "gemm_%s_%s_%s_%dx%dx%d_w%d_s%d%s%s",
                         tk_dtype_name(dts[d].in), tk_dtype_name(dts[d].out),
                         dts[d].tb ? "abt" : "ab", shapes[s].bm, shapes[s].bn, shapes[s].bk,
                         shapes[s].w, shapes[s].st, shapes[s].tma ? "_tma" : "",
                         shapes[s].wgmma ? "_wgmma" : "");
            }
        n += gemm_epilogue_variants(v + n, archs[a]);
        n += gemm_split_variants(v + n, archs[a]);
        for (int dt = 0; dt < 2; dt++)
            for (int d = 64; d <= 256; d *= 2)
                for (int c = 0; c < 2; c++)
                    for (int w = 0; w <= 8; w += 8) {
                        if (w && (dt || d != 128 || c)) continue; /* 8 warps: one variant */
                        if (d == 256 && dt) continue;             /* D 256: bf16 */
                        variant *x = &v[n++];
                        x->arch = archs[a];
                        x->a = (tk_attention_config){
                            .dtype = dt ? TK_F16 : TK_BF16, .head_dim = d, .causal = c, .warps = w};
                        snprintf(x->name, sizeof x->name, "attn_%s_d%d_%s%s", dt ? "f16" : "bf16",
                                 d, c ? "causal" : "full", w ? "_w8" : "");
                    }
        if (!strcmp(archs[a], "sm_90a")) /* the Hopper kernel: bf16, each D, causal and not */
            for (int d = 64; d <= 256; d *= 2)
                for (int c = 0; c < 2; c++) {
                    variant *x = &v[n++];
                    x->arch = archs[a];
                    x->a = (tk_attention_config){
                        .dtype = TK_BF16, .head_dim = d, .causal = c, .wgmma = 1};
                    snprintf(x->name, sizeof x->name, "attn_wgmma_bf16_d%d_%s", d,
                             c ? "causal" : "full");
                }
        /* Q's fused rotation: the Hopper kernel's paths (register A: NeoX
         * tables, GPT-J from base; D 256 stored back, NeoX pairs across
         * blocks) and the mma.sync kernel's Q in shared memory (D 128) */
        static const struct {
            int wg, d, c, rot, rd, tables;
        } ropes[] = {
            {1, 128, 0, TK_ATTN_ROTARY_NEOX, 0, 1},
            {1, 64, 1, TK_ATTN_ROTARY_GPTJ, 0, 0},
            {1, 256, 1, TK_ATTN_ROTARY_NEOX, 200, 1},
            {0, 128, 0, TK_ATTN_ROTARY_NEOX, 0, 0},
        };
        for (size_t i = 0; i < sizeof ropes / sizeof ropes[0]; i++) {
            if (ropes[i].wg && strcmp(archs[a], "sm_90a")) continue;
            variant *x = &v[n++];
            x->arch = archs[a];
            x->a = (tk_attention_config){.dtype = TK_BF16,
                                         .head_dim = ropes[i].d,
                                         .causal = ropes[i].c,
                                         .wgmma = ropes[i].wg,
                                         .rotary = ropes[i].rot,
                                         .rotary_dim = ropes[i].rd,
                                         .rotary_tables = ropes[i].tables};
            snprintf(x->name, sizeof x->name, "attn_%sbf16_d%d_%s_rope_%s%s%s",
                     ropes[i].wg ? "wgmma_" : "", ropes[i].d, ropes[i].c ? "causal" : "full",
                     ropes[i].rot == TK_ATTN_ROTARY_GPTJ ? "gptj" : "neox",
                     ropes[i].rd == 200 ? "_r200" : "", ropes[i].tables ? "_tables" : "");
        }
        static const char *const parts[] = {"dq", "dkdv", "prep", "fused", "convert"};
        for (int wg = 0; wg < 2; wg++)
            for (int part = 0; part < 5; part++)
                for (int dt = 0; dt < 2; dt++)
                    for (int d = 64; d <= 128; d += 64)
                        for (int c = 0; c < 2; c++) {
                            /* the Hopper kernels: sm_90a, bf16 */
                            if (wg && (strcmp(archs[a], "sm_90a") || dt)) continue;
                            /* prep and convert: one kernel for both sets, causal or not */
                            bool any = part == TK_ATTN_BWD_PREP || part == TK_ATTN_BWD_CONVERT;
                            if (any && (wg || c)) continue;
                            variant *x = &v[n++];
                            x->arch = archs[a];
                            x->is_bwd = 1;
                            x->b = (tk_attention_bwd_config){.dtype = dt ? TK_F16 : TK_BF16,
                                                             .head_dim = d,
                                                             .causal = c,
                                                             .part = part,
                                                             .wgmma = wg};
                            snprintf(x->name, sizeof x->name, "attn_bwd_%s_%s_d%d_%s%s",
                                     parts[part], dt ? "f16" : "bf16", d, c ? "causal" : "full",
                                     wg ? "_wgmma" : "");
                        }
        /* packed sequences (varlen): bf16 D 128 forward and backward, each
         * kernel set, causal or not; the mma.sync forward at D 64 and 256 */
        for (int wg = 0; wg < 2; wg++)
            for (int c = 0; c < 2; c++) {
                if (wg && strcmp(archs[a], "sm_90a")) continue;
                for (int d = 64; d <= 256; d *= 2) {
                    if (d != 128 && (wg || c)) continue;
                    variant *x = &v[n++];
                    x->arch = archs[a];
                    x->a = (tk_attention_config){
                        .dtype = TK_BF16, .head_dim = d, .causal = c, .wgmma = wg, .varlen = 1};
                    snprintf(x->name, sizeof x->name, "attn_varlen_%sbf16_d%d_%s",
                             wg ? "wgmma_" : "", d, c ? "causal" : "full");
                }
                for (int part = 0; part < 5; part++) {
                    bool any = part == TK_ATTN_BWD_PREP || part == TK_ATTN_BWD_CONVERT;
                    if (any && (wg || c)) continue;
                    variant *x = &v[n++];
                    x->arch = archs[a];
                    x->is_bwd = 1;
                    x->b = (tk_attention_bwd_config){.dtype = TK_BF16,
                                                     .head_dim = 128,
                                                     .causal = c,
                                                     .part = part,
                                                     .wgmma = wg,
                                                     .varlen = 1};
                    snprintf(x->name, sizeof x->name, "attn_varlen_bwd_%s_bf16_d128_%s%s",
                             parts[part], c ? "causal" : "full", wg ? "_wgmma" : "");
                }
            }
        /* decoding: each D, causal or not, packing, direct and split (one
         * warp, bf16); the merges; f16 and four warps once */
        static const char *const dparts[] = {"direct", "split", "merge"};
        for (int d = 64; d <= 256; d *= 2)
            for (int pack = 0; pack < 2; pack++)
                for (int part = 0; part < 3; part++)
                    for (int c = 0; c < 2; c++) {
                        if (part == TK_ATTN_DECODE_MERGE && c) continue;
                        variant *x = &v[n++];
                        x->arch = archs[a];
                        x->is_dec = 1;
                        x->dc = (tk_attention_decode_config){.dtype = TK_BF16,
                                                             .head_dim = d,
                                                             .causal = c,
                                                             .pack = pack,
                                                             .part = part};
                        snprintf(x->name, sizeof x->name, "attn_decode_%s_bf16_d%d_%s%s",
                                 dparts[part], d, pack ? "heads" : "queries", c ? "_causal" : "");
                    }
        for (int i = 0; i < 2; i++) {
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_dec = 1;
            x->dc = (tk_attention_decode_config){.dtype = i ? TK_BF16 : TK_F16,
                                                 .head_dim = 128,
                                                 .causal = 1,
                                                 .part = TK_ATTN_DECODE_SPLIT,
                                                 .warps = i ? 4 : 1};
            snprintf(x->name, sizeof x->name, "attn_decode_split_%s_d128_queries_causal%s",
                     i ? "bf16" : "f16", i ? "_w4" : "");
        }
        /* LayerNorm / RMSNorm: forward and backward with every option, the
         * reduction of the partials */
        static const struct {
            int kind, part, bias;
            const char *name;
        } norms[] = {
            {TK_NORM_LAYER, TK_NORM_FWD, 1, "layernorm_fwd_res_w_b"},
            {TK_NORM_LAYER, TK_NORM_BWD, 1, "layernorm_bwd_res_w_b"},
            {TK_NORM_RMS, TK_NORM_FWD, 0, "rmsnorm_fwd_res_w"},
            {TK_NORM_RMS, TK_NORM_BWD, 0, "rmsnorm_bwd_res_w"},
            {TK_NORM_LAYER, TK_NORM_BWD_REDUCE, 0, "norm_bwd_reduce"},
        };
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_norm = 1;
            bool red = norms[i].part == TK_NORM_BWD_REDUCE; /* f32 out */
            x->nc = (tk_norm_config){.dtype = red ? TK_DT_NONE : TK_BF16,
                                     .kind = norms[i].kind,
                                     .part = norms[i].part,
                                     .residual = 1,
                                     .weight = 1,
                                     .bias = norms[i].bias,
                                     .stats = 1};
            snprintf(x->name, sizeof x->name, "%s_bf16", norms[i].name);
        }
        /* Rotary embeddings: NeoX and GPT-J, tables and base, positions,
         * inverse, in place, a partial rotary_dim */
        static const tk_rotary_config rots[] = {
            {TK_BF16, TK_ROTARY_NEOX, 128, 128, 0, 0, 0, 0},
            {TK_BF16, TK_ROTARY_NEOX, 128, 128, 1, 0, 1, 1},
            {TK_F16, TK_ROTARY_NEOX, 64, 32, 0, 1, 0, 0},
            {TK_BF16, TK_ROTARY_GPTJ, 128, 128, 0, 0, 0, 0},
            {TK_BF16, TK_ROTARY_GPTJ, 256, 128, 0, 1, 1, 1},
            {TK_BF16, TK_ROTARY_NEOX, 128, 128, 1, 1, 0, 0}, /* a cache read at positions */
        };
        for (size_t i = 0; i < sizeof rots / sizeof rots[0]; i++) {
            const tk_rotary_config *r = &rots[i];
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_rot = 1;
            x->rc = *r;
            snprintf(x->name, sizeof x->name, "rotary_%s_%s_d%d_r%d%s%s%s%s",
                     r->style ? "gptj" : "neox", tk_dtype_name(r->dtype), r->head_dim,
                     r->rotary_dim, r->tables ? "_tables" : "", r->positions ? "_pos" : "",
                     r->inverse ? "_inv" : "", r->in_place ? "_inplace" : "");
        }
        /* Based linear attention: forward (normalized with z, and not) and
         * the backward's kernels */
        static const tk_based_config baseds[] = {
            {TK_BF16, TK_BASED_FWD, 1, 1, 16, 4, 0},
            {TK_F16, TK_BASED_FWD, 0, 0, 32, 4, 0},
            {TK_BF16, TK_BASED_BWD_DQ, 1, 0, 16, 4, 0},
            {TK_BF16, TK_BASED_BWD_DKV, 1, 0, 16, 4, 0},
            {TK_F16, TK_BASED_BWD_DKV, 0, 0, 16, 4, 0},
            {TK_BF16, TK_BASED_BWD_PREP, 1, 0, 16, 4, 0},
            {TK_BF16, TK_BASED_BWD_SUM, 0, 0, 16, 4, 0},
            /* sequence segments: state passes and segment kernels */
            {TK_BF16, TK_BASED_FWD, 1, 1, 16, 4, TK_BASED_SEG_RUN},
            {TK_BF16, TK_BASED_FWD, 1, 0, 16, 4, TK_BASED_SEG_STATE},
            {TK_BF16, TK_BASED_BWD_DQ, 1, 0, 16, 4, TK_BASED_SEG_RUN},
            {TK_BF16, TK_BASED_BWD_DKV, 1, 0, 16, 4, TK_BASED_SEG_RUN},
            {TK_BF16, TK_BASED_BWD_DKV, 1, 0, 16, 4, TK_BASED_SEG_STATE},
        };
        static const char *const based_parts[] = {"fwd", "dq", "dkv", "prep", "sum"};
        for (size_t i = 0; i < sizeof baseds / sizeof baseds[0]; i++) {
            const tk_based_config *b = &baseds[i];
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_based = 1;
            x->bc = *b;
            static const char *const segs[] = {"", "_seg", "_segstate"};
            snprintf(x->name, sizeof x->name, "based_%s_%s_v%d%s%s%s", based_parts[b->part],
                     tk_dtype_name(b->dtype), b->v_cols, b->normalize ? "_norm" : "",
                     b->stats ? "_stats" : "", segs[b->seg]);
        }
        /* Hedgehog linear attention: the defaults at D 64 (with z) and D 128,
         * an A100's D 128 shape, and 8 warps (two key blocks a chunk); the
         * backward's kernels: PREP normalized, DPHI of the queries (CX) at D
         * 128 and of the keys (CY) at D 64, FMAP at both, REDUCE; the
         * forward's sequence segments (RUN at D 64, STATE at D 128); the maps
         * apart: MAP at both dims, the forward reading them (phi), plain and
         * in segments */
        static const tk_hedgehog_config hhs[] = {
            {TK_BF16, 64, 1, 1, 1, 64, 4, 0, 0, 0, 0, 0},
            {TK_BF16, 128, 1, 0, 1, 32, 4, 0, 0, 0, 0, 0},
            {TK_F16, 128, 0, 0, 0, 16, 2, 0, 0, 0, 0, 0},
            {TK_BF16, 64, 0, 1, 0, 16, 8, 0, 0, 0, 0, 0},
            {TK_BF16, 0, 1, 0, 0, 0, 0, TK_HEDGEHOG_BWD_PREP, 0, 0, 0, 0},
            {TK_BF16, 128, 0, 0, 1, 128, 0, TK_HEDGEHOG_BWD_DPHI, 0, 1, 0, 0},
            {TK_F16, 64, 0, 0, 0, 64, 0, TK_HEDGEHOG_BWD_DPHI, 0, 2, 0, 0},
            {TK_BF16, 128, 0, 0, 1, 0, 0, TK_HEDGEHOG_BWD_FMAP, 0, 0, 0, 0},
            {TK_BF16, 64, 0, 0, 0, 0, 0, TK_HEDGEHOG_BWD_FMAP, 0, 0, 0, 0},
            {TK_BF16, 0, 0, 0, 0, 0, 0, TK_HEDGEHOG_BWD_REDUCE, 0, 0, 0, 0},
            {TK_BF16, 64, 1, 0, 1, 64, 4, 0, 0, 0, TK_HEDGEHOG_SEG_RUN, 0},
            {TK_BF16, 128, 1, 1, 1, 32, 4, 0, 0, 0, TK_HEDGEHOG_SEG_STATE, 0},
            {TK_BF16, 128, 0, 0, 1, 0, 4, TK_HEDGEHOG_MAP, 0, 0, 0, 0},
            {TK_F16, 64, 0, 0, 0, 0, 4, TK_HEDGEHOG_MAP, 0, 0, 0, 0},
            {TK_BF16, 128, 1, 0, 0, 32, 4, 0, 0, 0, 0, 1},
            {TK_BF16, 64, 1, 1, 0, 64, 4, 0, 0, 0, TK_HEDGEHOG_SEG_RUN, 1},
            {TK_BF16, 128, 1, 0, 0, 32, 4, 0, 0, 0, TK_HEDGEHOG_SEG_STATE, 1},
            /* dΦ reading MAP's φᵀ (the backward's maps apart; the bias MAP's) */
            {TK_BF16, 128, 0, 0, 0, 128, 0, TK_HEDGEHOG_BWD_DPHI, 0, 1, 0, 1},
            {TK_F16, 64, 0, 0, 0, 64, 0, TK_HEDGEHOG_BWD_DPHI, 0, 2, 0, 1},
        };
        static const char *const hh_parts[] = {"fwd", "prep", "dphi", "fmap", "reduce", "map"};
        for (size_t i = 0; i < sizeof hhs / sizeof hhs[0]; i++) {
            const tk_hedgehog_config *h = &hhs[i];
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_hh = 1;
            x->hc = *h;
            static const char *const segs[] = {"", "_segrun", "_segstate"};
            snprintf(x->name, sizeof x->name, "hedgehog_%s_%s_d%d_v%d_w%d%s%s%s%s%s%s",
                     hh_parts[h->part], tk_dtype_name(h->dtype), h->head_dim, h->v_cols, h->warps,
                     h->normalize ? "_norm" : "", h->stats ? "_stats" : "", h->bias ? "_bias" : "",
                     h->c_side ? (h->c_side == 1 ? "_cx" : "_cy") : "", segs[h->seg],
                     h->phi ? "_phi" : "");
        }
        { /* the one-warp merge (at most one group of partials) */
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_dec = 1;
            x->dc = (tk_attention_decode_config){.dtype = TK_BF16,
                                                 .head_dim = 128,
                                                 .pack = 1,
                                                 .part = TK_ATTN_DECODE_MERGE,
                                                 .warps = 1};
            snprintf(x->name, sizeof x->name, "attn_decode_merge_bf16_d128_heads_w1");
        }
        /* from a cache: lengths, pages of whole tiles and of 16-row copies,
         * and the append kernels */
        static const struct {
            int cache, chunk, part, pack, causal, kw;
            const char *name;
        } cached[] = {
            {TK_ATTN_CACHE_LENGTHS, 0, TK_ATTN_DECODE_DIRECT, 1, 0, 0, "direct_lens_heads"},
            {TK_ATTN_CACHE_PAGED, 0, TK_ATTN_DECODE_SPLIT, 1, 0, 0, "split_paged_heads"},
            {TK_ATTN_CACHE_PAGED, 16, TK_ATTN_DECODE_SPLIT, 1, 0, 0, "split_paged16_heads"},
            {TK_ATTN_CACHE_PAGED, 32, TK_ATTN_DECODE_SPLIT, 0, 1, 0,
             "split_paged32_queries_causal"},
            {TK_ATTN_CACHE_LENGTHS, 0, TK_ATTN_DECODE_APPEND, 0, 0, 0, "append_lens"},
            {TK_ATTN_CACHE_PAGED, 0, TK_ATTN_DECODE_APPEND, 0, 0, 0, "append_paged"},
            /* warps sharing a tile's keys */
            {TK_ATTN_CACHE_NONE, 0, TK_ATTN_DECODE_SPLIT, 1, 0, 4, "split_heads_k4"},
            {TK_ATTN_CACHE_NONE, 0, TK_ATTN_DECODE_SPLIT, 0, 1, 2, "split_queries_causal_k2"},
            {TK_ATTN_CACHE_PAGED, 16, TK_ATTN_DECODE_SPLIT, 1, 0, 2, "split_paged16_heads_k2"},
        };
        for (size_t i = 0; i < sizeof cached / sizeof cached[0]; i++) {
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_dec = 1;
            x->dc = (tk_attention_decode_config){.dtype = TK_BF16,
                                                 .head_dim = 128,
                                                 .causal = cached[i].causal,
                                                 .pack = cached[i].pack,
                                                 .part = cached[i].part,
                                                 .cache = cached[i].cache,
                                                 .chunk = cached[i].chunk,
                                                 .key_warps = cached[i].kw};
            snprintf(x->name, sizeof x->name, "attn_decode_%s_bf16_d128", cached[i].name);
        }
        /* The optimizer step: the partial sums of squares (f32 gradients), the
         * norm, the fused clip + AdamW with the bf16 copy (the defaults) */
        static const tk_adamw_config adamws[] = {
            {TK_ADAMW_SUMSQ, TK_F32, TK_DT_NONE, 0, 0, 0},
            {TK_ADAMW_NORM, TK_DT_NONE, TK_DT_NONE, 0, 0, 0},
            {TK_ADAMW_STEP, TK_F32, TK_BF16, 1, 0, 0},
        };
        static const char *const adamw_parts[] = {"sumsq_f32", "norm", "step_f32_bf16_clip"};
        for (size_t i = 0; i < sizeof adamws / sizeof adamws[0]; i++) {
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_adamw = 1;
            x->ac = adamws[i];
            snprintf(x->name, sizeof x->name, "adamw_%s", adamw_parts[i]);
        }
        /* Softmax cross-entropy: 16-row blocks (a byte vocabulary) with every
         * output, split rows (GPT-2's vocabulary) with a per-row scale, and the
         * mean of the partials */
        static const tk_xent_config xents[] = {
            {TK_BF16, TK_XENT_ROWS, 1, 0, 1, 1, 0, 0, 0},
            {TK_BF16, TK_XENT_ROWS, 1, 1, 1, 0, 1, 0, 0},
            {TK_DT_NONE, TK_XENT_MEAN, 0, 0, 0, 0, 0, 0, 0},
        };
        static const char *const xent_names[] = {"xent_rows_bf16_bwd_lse_mean",
                                                 "xent_split_bf16_bwd_rowscale_lse", "xent_mean"};
        for (size_t i = 0; i < sizeof xents / sizeof xents[0]; i++) {
            variant *x = &v[n++];
            x->arch = archs[a];
            x->is_xent = 1;
            x->xc = xents[i];
            snprintf(x->name, sizeof x->name, "%s", xent_names[i]);
        }
        n += train_variants(v + n, archs[a]);
    }
    return n;
}

/* ---- Lowering, in parallel ----------------------------------------------------- */
typedef struct result {
    char *ptx;
    tk_status st;
    char err[512];
} result;

typedef struct work {
    const variant *v;
    result *r;
    int n;
    int next; /* shared, atomic */
} work;

static void lower_one(const variant *v, result *r) {
    tk_ctx *ctx = NULL;
    tk_kernel *k = NULL;
    r->st = tk_ctx_create(&ctx);
    if (!r->st)
        r->st = v->is_gemm    ? tk_gemm_build(ctx, &v->g, &k)
                : v->is_bwd   ? tk_attention_bwd_build(ctx, &v->b, &k)
                : v->is_dec   ? tk_attention_decode_build(ctx, &v->dc, &k)
                : v->is_norm  ? tk_norm_build(ctx, &v->nc, &k)
                : v->is_rot   ? tk_rotary_build(ctx, &v->rc, &k)
                : v->is_based ? tk_based_build(ctx, &v->bc, &k)
                : v->is_hh    ? tk_hedgehog_build(ctx, &v->hc, &k)
                : v->is_adamw ? tk_adamw_build(ctx, &v->ac, &k)
                : v->is_xent  ? tk_xent_build(ctx, &v->xc, &k)
                : v->is_emb   ? tk_embedding_build(ctx, &v->ec, &k)
                : v->is_bias  ? tk_bias_grad_build(ctx, &v->bgc, &k)
                              : tk_attention_fwd_build(ctx, &v->a, &k);
    if (!r->st) r->st = tk_emit_ptx(ctx, k, v->arch, &r->ptx);
    if (r->st) snprintf(r->err, sizeof r->err, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}

static void *worker(void *arg) {
    work *w = arg;
    for (int i; (i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n;)
        lower_one(&w->v[i], &w->r[i]);
    return NULL;
}

static void lower_all(const variant *v, result *r, int n) {
    work w = {v, r, n, 0};
    pthread_t th[4];
    int nt = 0;
    for (; nt < 4; nt++)
        if (pthread_create(&th[nt], NULL, worker, &w)) break;
    worker(&w);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
}

/* ---- Golden file ------------------------------------------------------------------ */
static void golden_path(char *buf, size_t n) {
    snprintf(buf, n, "%s/tests/golden/ptx.txt", TK_SOURCE_DIR);
}

static void write_golden(const variant *v, const result *r, int n) {
    char path[1024];
    golden_path(path, sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fprintf(f,
            "# PTX digests of the shipped kernels (tests/test_golden_ptx.c).\n"
            "# variant arch xxh3-64 bytes; TK_UPDATE_GOLDEN=1 rewrites this file.\n"
            "llvm %s\n",
            TK_LLVM_VERSION);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s %s %016llx %zu\n", v[i].name, v[i].arch,
                (unsigned long long)XXH3_64bits(r[i].ptx, strlen(r[i].ptx)), strlen(r[i].ptx));
    fclose(f);
    fprintf(stderr, "golden: rewrote %s (%d variants)\n", path, n);
}

static void dump(const char *dir, const variant *v, const result *r, int n) {
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%s.ptx", dir, v[i].name, v[i].arch);
        FILE *f = fopen(path, "w");
        ck_assert_msg(f != NULL, "cannot write %s", path);
        fputs(r[i].ptx, f);
        fclose(f);
    }
}

/* Compares with the golden file; returns the number of mismatches. */
static int compare(const variant *v, const result *r, int n) {
    char path[1024], line[256], llvm[64] = "";
    golden_path(path, sizeof path);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "golden %s is missing; run with TK_UPDATE_GOLDEN=1 to create it",
                  path);
    int bad = 0, seen = 0;
    char *seen_mask = calloc((size_t)n, 1);
    while (fgets(line, sizeof line, f)) {
        char name[64], arch[16];
        unsigned long long h;
        size_t len;
        if (line[0] == '#') continue;
        if (sscanf(line, "llvm %63s", llvm) == 1) {
            if (strcmp(llvm, TK_LLVM_VERSION)) {
                printf("golden PTX skipped: recorded with LLVM %s, this build has %s\n", llvm,
                       TK_LLVM_VERSION);
                fclose(f);
                free(seen_mask);
                return -1;
            }
            continue;
        }
        if (sscanf(line, "%63s %15s %llx %zu", name, arch, &h, &len) != 4) continue;
        int i = 0;
        while (i < n && (strcmp(v[i].name, name) || strcmp(v[i].arch, arch))) i++;
        if (i == n) {
            fprintf(stderr, "golden PTX: %s %s is no longer built\n", name, arch);
            bad++;
            continue;
        }
        seen_mask[i] = 1;
        seen++;
        unsigned long long now = XXH3_64bits(r[i].ptx, strlen(r[i].ptx));
        if (now != h) {
            fprintf(stderr, "golden PTX: %s %s changed (%zu -> %zu bytes)\n", name, arch, len,
                    strlen(r[i].ptx));
            bad++;
        }
    }
    fclose(f);
    for (int i = 0; i < n; i++)
        if (!seen_mask[i]) {
            fprintf(stderr, "golden PTX: %s %s is new\n", v[i].name, v[i].arch);
            bad++;
        }
    free(seen_mask);
    if (bad)
        fprintf(stderr,
                "golden PTX: %d of %d variants differ. Read the diff with "
                "scripts/ptx-diff.sh; accept it with TK_UPDATE_GOLDEN=1.\n",
                bad, n);
    return bad;
}

START_TEST(test_golden_ptx) {
    variant *v = calloc(MAX_VARIANTS, sizeof *v);
    int n = make_variants(v);
    ck_assert_int_le(n, MAX_VARIANTS);
    result *r = calloc((size_t)n, sizeof *r);
    lower_all(v, r, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(r[i].st == TK_OK, "%s on %s: %s", v[i].name, v[i].arch, r[i].err);
    const char *dir = getenv("TK_PTX_DUMP");
    if (dir && *dir) dump(dir, v, r, n);
    const char *up = getenv("TK_UPDATE_GOLDEN");
    if (up && *up && strcmp(up, "0"))
        write_golden(v, r, n);
    else
        ck_assert_int_le(compare(v, r, n), 0);
    for (int i = 0; i < n; i++) free(r[i].ptx);
    free(r);
    free(v);
}
END_TEST

int main(void) {
    Suite *s = suite_create("golden_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_golden_ptx);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
