#include "util/params.h"

tk_gemm_params tu_gemm_params(tk_dtype in_dtype, tk_dtype out_dtype, int64_t m, int64_t n,
                              int64_t k, void *buf) {
    return (tk_gemm_params){.struct_size = sizeof(tk_gemm_params),
                            .in_dtype = in_dtype,
                            .out_dtype = out_dtype,
                            .m = m,
                            .n = n,
                            .k = k,
                            .a = buf,
                            .b = buf,
                            .c = buf};
}

tk_attention_params tu_attention_params(tk_dtype dtype, int head_dim, int64_t heads_q,
                                        int64_t heads_kv, int64_t seq, void *buf) {
    return (tk_attention_params){.struct_size = sizeof(tk_attention_params),
                                 .dtype = dtype,
                                 .head_dim = head_dim,
                                 .batch = 1,
                                 .heads_q = heads_q,
                                 .heads_kv = heads_kv,
                                 .seq_q = seq,
                                 .seq_kv = seq,
                                 .q = buf,
                                 .k = buf,
                                 .v = buf,
                                 .o = buf,
                                 .lse = buf};
}
