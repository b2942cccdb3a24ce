/* tk_dump: print a built-in kernel at any stage, to read what the compiler
 * makes of it (the brief's "compile it in your head", checked).
 *
 *   tk_dump gemm|attention|norm|rotary|based|hedgehog [ir|llvm|ptx] [arch] [options]
 *     gemm options:      in=bf16|f16 out=bf16|f16|f32 tb=0|1, and bm= bn= bk= warps=
 *                        stages= tma= wgmma= to override the default block shape;
 *                        the epilogue: ta= bias= acc= (0|1) act=0|1|2 (none, GELU,
 *                        DGELU) aux=0|1; the split over K: split=0|2..64 (kernel 1,
 *                        f32 partials) and reduce=1 (kernel 2: the sum, the epilogue)
 *     attention options: dtype=bf16|f16 d=64|128|256 causal=0|1 warps=4|8|12
 *                        wgmma=0|1 varlen=0|1 rotary=none|neox|gptj (Q's fused
 *                        rotation) rd=0|2..d (0: d) tables=0|1 (neox: Cos/Sin)
 *     norm options:      dtype=bf16|f16 kind=layer|rms part=fwd|bwd|reduce res=0|1
 *                        w=0|1 b=0|1 stats=0|1 warps=1..16 cols=0|32·warps·n
 *     rotary options:    dtype=bf16|f16 style=neox|gptj d=64|128|256 rd= tables=0|1
 *                        pos=0|1 inv=0|1 inplace=0|1
 *     based options:     dtype=bf16|f16 part=fwd|dq|dkv norm=0|1 stats=0|1 v=16..128
 *                        warps=1|2|4|8
 *     hedgehog options:  dtype=bf16|f16 d=64|128 norm=0|1 stats=0|1 bias=0|1
 *                        v=16..128 warps=1|2|4|8 (v, warps 0: the defaults)
 *                        part=fwd|map|dphi seg=0|1|2 phi=0|1; dphi: v=16..256
 *                        (required: the value dim), f=0|16·n (f_cols; 0: the
 *                        library's), c=0|1|2 (c_side)
 *   e.g. tk_dump attention ptx sm_90a d=128 > attn.ptx && ptxas -arch=sm_90a -v attn.ptx */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

static const char *opt(int argc, char **argv, const char *key, const char *dflt) {
    size_t n = strlen(key);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], key, n) && argv[i][n] == '=') return argv[i] + n + 1;
    return dflt;
}

static tk_dtype dtype(const char *s) {
    return !strcmp(s, "f16") ? TK_F16 : !strcmp(s, "f32") ? TK_F32 : TK_BF16;
}

int main(int argc, char **argv) {
    static const char *kinds[] = {"gemm", "attention", "norm", "rotary", "based", "hedgehog"};
    int kind = -1;
    for (int i = 0; argc >= 2 && i < 6; i++)
        if (!strcmp(argv[1], kinds[i])) kind = i;
    if (kind < 0) {
        fprintf(stderr, "usage: tk_dump gemm|attention|norm|rotary|based|hedgehog [ir|llvm|ptx] "
                        "[arch] [key=value...]\n");
        return 2;
    }
    const char *stage = argc > 2 && !strchr(argv[2], '=') ? argv[2] : "ir";
    const char *arch = argc > 3 && !strchr(argv[3], '=') ? argv[3] : "sm_90a";
    tk_ctx *ctx;
    tk_kernel *k = NULL;
    if (tk_ctx_create(&ctx)) return 1;
    tk_status s;
    if (kind == 0) {
        tk_gemm_config c = tk_gemm_default_config(dtype(opt(argc, argv, "in", "bf16")),
                                                  dtype(opt(argc, argv, "out", "bf16")),
                                                  atoi(opt(argc, argv, "tb", "0")));
        c.block_m = atoi(opt(argc, argv, "bm", "128"));
        c.block_n = atoi(opt(argc, argv, "bn", "128"));
        c.block_k = atoi(opt(argc, argv, "bk", "64"));
        c.warps = atoi(opt(argc, argv, "warps", "4"));
        c.stages = atoi(opt(argc, argv, "stages", "3"));
        c.tma = atoi(opt(argc, argv, "tma", "0"));
        c.wgmma = atoi(opt(argc, argv, "wgmma", "0"));
        c.transpose_a = atoi(opt(argc, argv, "ta", "0"));
        c.bias = atoi(opt(argc, argv, "bias", "0"));
        c.act = atoi(opt(argc, argv, "act", "0"));
        c.aux = atoi(opt(argc, argv, "aux", "0"));
        c.accumulate = atoi(opt(argc, argv, "acc", "0"));
        c.split_k = atoi(opt(argc, argv, "split", "0"));
        c.split_reduce = atoi(opt(argc, argv, "reduce", "0"));
        c.cluster = atoi(opt(argc, argv, "cluster", "0"));
        s = tk_gemm_build(ctx, &c, &k);
    } else if (kind == 4) {
        const char *part = opt(argc, argv, "part", "fwd");
        tk_based_config c = {.dtype = dtype(opt(argc, argv, "dtype", "bf16")),
                             .part = !strcmp(part, "dq")    ? TK_BASED_BWD_DQ
                                     : !strcmp(part, "dkv") ? TK_BASED_BWD_DKV
                                                            : TK_BASED_FWD,
                             .normalize = atoi(opt(argc, argv, "norm", "1")),
                             .stats = atoi(opt(argc, argv, "stats", "0")),
                             .v_cols = atoi(opt(argc, argv, "v", "0")),
                             .warps = atoi(opt(argc, argv, "warps", "0")),
                             .seg = atoi(opt(argc, argv, "seg", "0"))};
        s = tk_based_build(ctx, &c, &k);
    } else if (kind == 5) {
        const char *part = opt(argc, argv, "part", "fwd");
        tk_hedgehog_config c = {.dtype = dtype(opt(argc, argv, "dtype", "bf16")),
                                .head_dim = atoi(opt(argc, argv, "d", "128")),
                                .normalize = atoi(opt(argc, argv, "norm", "1")),
                                .stats = atoi(opt(argc, argv, "stats", "0")),
                                .bias = atoi(opt(argc, argv, "bias", "1")),
                                .v_cols = atoi(opt(argc, argv, "v", "0")),
                                .warps = atoi(opt(argc, argv, "warps", "0")),
                                .part = !strcmp(part, "map")    ? TK_HEDGEHOG_MAP
                                        : !strcmp(part, "dphi") ? TK_HEDGEHOG_BWD_DPHI
                                                                : TK_HEDGEHOG_FWD,
                                .f_cols = atoi(opt(argc, argv, "f", "0")),
                                .c_side = atoi(opt(argc, argv, "c", "0")),
                                .seg = atoi(opt(argc, argv, "seg", "0")),
                                .phi = atoi(opt(argc, argv, "phi", "0"))};
        s = tk_hedgehog_build(ctx, &c, &k);
    } else if (kind == 3) {
        int d = atoi(opt(argc, argv, "d", "128"));
        tk_rotary_config c = {.dtype = dtype(opt(argc, argv, "dtype", "bf16")),
                              .style = !strcmp(opt(argc, argv, "style", "neox"), "gptj"),
                              .head_dim = d,
                              .rotary_dim = atoi(opt(argc, argv, "rd", "0")),
                              .tables = atoi(opt(argc, argv, "tables", "0")),
                              .positions = atoi(opt(argc, argv, "pos", "0")),
                              .inverse = atoi(opt(argc, argv, "inv", "0")),
                              .in_place = atoi(opt(argc, argv, "inplace", "0"))};
        if (!c.rotary_dim) c.rotary_dim = d;
        s = tk_rotary_build(ctx, &c, &k);
    } else if (kind == 2) {
        const char *part = opt(argc, argv, "part", "fwd");
        tk_norm_config c = {.dtype = dtype(opt(argc, argv, "dtype", "bf16")),
                            .kind = !strcmp(opt(argc, argv, "kind", "layer"), "rms"),
                            .part = !strcmp(part, "bwd")      ? TK_NORM_BWD
                                    : !strcmp(part, "reduce") ? TK_NORM_BWD_REDUCE
                                                              : TK_NORM_FWD,
                            .residual = atoi(opt(argc, argv, "res", "1")),
                            .weight = atoi(opt(argc, argv, "w", "1")),
                            .bias = atoi(opt(argc, argv, "b", "0")),
                            .stats = atoi(opt(argc, argv, "stats", "1")),
                            .warps = atoi(opt(argc, argv, "warps", "0")),
                            .cols = atoi(opt(argc, argv, "cols", "0"))};
        s = tk_norm_build(ctx, &c, &k);
    } else {
        const char *rope = opt(argc, argv, "rotary", "none");
        tk_attention_config c = {.dtype = dtype(opt(argc, argv, "dtype", "bf16")),
                                 .head_dim = atoi(opt(argc, argv, "d", "128")),
                                 .causal = atoi(opt(argc, argv, "causal", "0")),
                                 .warps = atoi(opt(argc, argv, "warps", "0")),
                                 .wgmma = atoi(opt(argc, argv, "wgmma", "0")),
                                 .varlen = atoi(opt(argc, argv, "varlen", "0")),
                                 .rotary = !strcmp(rope, "neox")   ? TK_ATTN_ROTARY_NEOX
                                           : !strcmp(rope, "gptj") ? TK_ATTN_ROTARY_GPTJ
                                                                   : atoi(rope),
                                 .rotary_dim = atoi(opt(argc, argv, "rd", "0")),
                                 .rotary_tables = atoi(opt(argc, argv, "tables", "0"))};
        s = tk_attention_fwd_build(ctx, &c, &k);
    }
    char *text = NULL;
    if (!s)
        s = !strcmp(stage, "ptx")    ? tk_emit_ptx(ctx, k, arch, &text)
            : !strcmp(stage, "llvm") ? tk_emit_llvm(ctx, k, arch, &text)
                                     : tk_kernel_print(k, &text);
    if (s)
        fprintf(stderr, "tk_dump: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
    else
        fputs(text, stdout);
    tk_free(text);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return s ? 1 : 0;
}
