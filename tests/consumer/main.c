/* A program that uses an installed TileKittens, as a user's would
 * (scripts/test-install.sh builds it with find_package and with pkg-config):
 * it builds a kernel, runs it on the interpreter and checks the result. */
#include <stdio.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_run.h"

int main(void) {
    if (strcmp(tk_version(), "") == 0 || tk_version_number() != TK_VERSION_NUMBER) {
        fprintf(stderr, "consumer: headers %d, library %s\n", TK_VERSION_NUMBER, tk_version());
        return 1;
    }
    tk_ctx *ctx = NULL;
    if (tk_ctx_create(&ctx)) return 1;
    /* out = in * 2 + 1 on a 16 x 16 f32 tile, one block of one warp. */
    tk_kernel *k = NULL;
    tk_status s = tk_kernel_create(ctx, "axpb", 1, &k);
    if (s) return fprintf(stderr, "consumer: %s\n", tk_ctx_error(ctx)), 1;
    tk_value *in = tk_param_tensor(k, "in", TK_F32, 2);
    tk_value *out = tk_param_tensor(k, "out", TK_F32, 2);
    tk_value *idx[2] = {tk_const_i64(k, 0), tk_const_i64(k, 0)};
    tk_type t = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
    tk_value *x = tk_load(k, t, in, idx, 0.0f);
    tk_store(k, out, idx, tk_add(k, tk_mul(k, x, tk_const_f32(k, 2.0f)), tk_const_f32(k, 1.0f)));
    tk_set_grid(k, tk_const_i64(k, 1), NULL, NULL);
    if ((s = tk_kernel_finish(k))) return fprintf(stderr, "consumer: %s\n", tk_kernel_error(k)), 1;
    static float a[256], b[256];
    for (int i = 0; i < 256; i++) a[i] = (float)i, b[i] = -1.0f;
    int64_t dims[2] = {16, 16};
    tk_arg args[2] = {tk_arg_tensor(a, TK_F32, 2, dims), tk_arg_tensor(b, TK_F32, 2, dims)};
    if ((s = tk_interp_run(k, 2, args)))
        return fprintf(stderr, "consumer: interp: %s\n", tk_status_name(s)), 1;
    for (int i = 0; i < 256; i++)
        if (b[i] != 2.0f * (float)i + 1.0f) return fprintf(stderr, "consumer: b[%d]\n", i), 1;
    /* The parameter structs' size field, as the library wants it. */
    tk_gemm_params g = TK_GEMM_PARAMS_INIT;
    if (g.struct_size != sizeof g) return 1;
    tk_kernel_destroy(k);
    /* the kernel pack an install puts beside the library (none: "-") */
    const char *pack = tk_cache_pack(ctx, 0);
    printf("consumer: TileKittens %s ok; kernel pack %s\n", tk_version(), pack ? pack : "-");
    tk_ctx_destroy(ctx);
    return 0;
}
