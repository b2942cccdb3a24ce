"""ctypes binding of TileKittens' ready-made kernels (include/tk/tk_run.h), so the
benchmarks time our kernels and PyTorch's peers the same way (triton do_bench,
CUDA events, same stream, same process). Used on the GPU machine with the
shared library from scripts/build-device.sh."""
import ctypes
import os

TK_BF16, TK_F16, TK_F32 = 2, 3, 1
_DT = {"bf16": TK_BF16, "f16": TK_F16, "f32": TK_F32}


# Both parameter structs open with struct_size (include/tk/tk_run.h): set to
# the ctypes size, which must match C's sizeof (docs/API.md, "Parameter structs").
# The two attention structs share their first fields, in the same order.
_ATTENTION_HEAD = [
    ("struct_size", ctypes.c_size_t),
    ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int32), ("causal", ctypes.c_int32),
    ("scale", ctypes.c_float),
    ("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
    ("seq_q", ctypes.c_int64), ("seq_kv", ctypes.c_int64),
    ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
]


class AttentionParams(ctypes.Structure):
    _fields_ = _ATTENTION_HEAD + [
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("o_strides", ctypes.c_int64 * 4),
        ("lse_strides", ctypes.c_int64 * 3), ("kernel", ctypes.c_int32),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("num_splits", ctypes.c_int32),
        ("seqlens_kv", ctypes.c_void_p), ("block_table", ctypes.c_void_p),
        ("max_pages", ctypes.c_int64), ("num_pages", ctypes.c_int64),
        ("page_size", ctypes.c_int64), ("k_new", ctypes.c_void_p), ("v_new", ctypes.c_void_p),
        ("k_new_strides", ctypes.c_int64 * 4), ("v_new_strides", ctypes.c_int64 * 4),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_kv", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_kv", ctypes.c_int64),
        ("rotary", ctypes.c_void_p),  # const tk_rotary_params * (RotaryParams), NULL: none
    ]


class AttentionBwdParams(ctypes.Structure):
    _fields_ = _ATTENTION_HEAD + [
        ("o", ctypes.c_void_p), ("dout", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("o_strides", ctypes.c_int64 * 4),
        ("dout_strides", ctypes.c_int64 * 4), ("dq_strides", ctypes.c_int64 * 4),
        ("dk_strides", ctypes.c_int64 * 4), ("dv_strides", ctypes.c_int64 * 4),
        ("lse_strides", ctypes.c_int64 * 3), ("kernel", ctypes.c_int32),
        ("mode", ctypes.c_int32),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_kv", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_kv", ctypes.c_int64),
    ]


class GemmConfig(ctypes.Structure):
    _fields_ = [
        ("in_dtype", ctypes.c_int), ("out_dtype", ctypes.c_int), ("transpose_b", ctypes.c_int),
        ("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("block_k", ctypes.c_int),
        ("warps", ctypes.c_int), ("stages", ctypes.c_int), ("tma", ctypes.c_int),
        ("wgmma", ctypes.c_int),
        ("transpose_a", ctypes.c_int), ("bias", ctypes.c_int), ("act", ctypes.c_int),
        ("aux", ctypes.c_int), ("accumulate", ctypes.c_int),
        ("split_k", ctypes.c_int), ("split_reduce", ctypes.c_int), ("cluster", ctypes.c_int),
    ]


class GemmParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("in_dtype", ctypes.c_int), ("out_dtype", ctypes.c_int), ("transpose_b", ctypes.c_int32),
        ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64),
        ("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("c", ctypes.c_void_p),
        ("lda", ctypes.c_int64), ("ldb", ctypes.c_int64), ("ldc", ctypes.c_int64),
        ("config", ctypes.POINTER(GemmConfig)),
        ("transpose_a", ctypes.c_int32), ("accumulate", ctypes.c_int32),
        ("bias", ctypes.c_void_p), ("aux", ctypes.c_void_p), ("ldaux", ctypes.c_int64),
        ("act", ctypes.c_int32),  # tk_gemm_act: 0 none, 1 GELU, 2 DGELU
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("split_k", ctypes.c_int32),  # 0: the library's choice (with a workspace), 1: none
    ]


class NormConfig(ctypes.Structure):  # tk_norm_config (the run API reads warps and cols)
    _fields_ = [(n, ctypes.c_int) for n in
                ("dtype", "kind", "part", "residual", "weight", "bias", "stats", "warps", "cols")]


class NormParams(ctypes.Structure):  # tk_norm_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("kind", ctypes.c_int32),
        ("eps", ctypes.c_float), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("residual", ctypes.c_void_p),
        ("weight", ctypes.c_void_p), ("bias", ctypes.c_void_p),
        ("h", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
        ("x_stride", ctypes.c_int64), ("residual_stride", ctypes.c_int64),
        ("h_stride", ctypes.c_int64), ("y_stride", ctypes.c_int64),
        ("config", ctypes.POINTER(NormConfig)),
    ]


class NormBwdParams(ctypes.Structure):  # tk_norm_bwd_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("kind", ctypes.c_int32),
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("h", ctypes.c_void_p), ("dy", ctypes.c_void_p), ("dh", ctypes.c_void_p),
        ("weight", ctypes.c_void_p), ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
        ("dx", ctypes.c_void_p), ("dweight", ctypes.c_void_p), ("dbias", ctypes.c_void_p),
        ("grad_dtype", ctypes.c_int),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("h_stride", ctypes.c_int64), ("dy_stride", ctypes.c_int64),
        ("dh_stride", ctypes.c_int64), ("dx_stride", ctypes.c_int64),
        ("config", ctypes.POINTER(NormConfig)),
    ]


class RotaryParams(ctypes.Structure):  # tk_rotary_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("style", ctypes.c_int32),
        ("head_dim", ctypes.c_int32), ("rotary_dim", ctypes.c_int32), ("inverse", ctypes.c_int32),
        ("batch", ctypes.c_int64), ("seq", ctypes.c_int64),
        ("heads_q", ctypes.c_int64), ("heads_k", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p),
        ("q_out", ctypes.c_void_p), ("k_out", ctypes.c_void_p),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("q_out_strides", ctypes.c_int64 * 4), ("k_out_strides", ctypes.c_int64 * 4),
        ("cos", ctypes.c_void_p), ("sin", ctypes.c_void_p), ("table_rows", ctypes.c_int64),
        ("positions", ctypes.c_void_p), ("base", ctypes.c_float),
    ]


class BasedParams(ctypes.Structure):  # tk_based_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("normalize", ctypes.c_int32),
        ("scale", ctypes.c_float), ("eps", ctypes.c_float),
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("seq", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("z", ctypes.c_void_p),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("o_strides", ctypes.c_int64 * 4),
        ("z_strides", ctypes.c_int64 * 3), ("v_cols", ctypes.c_int32),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("segments", ctypes.c_int32),
    ]


class BasedBwdParams(ctypes.Structure):  # tk_based_bwd_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("normalize", ctypes.c_int32),
        ("scale", ctypes.c_float), ("eps", ctypes.c_float),
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("seq", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("dout", ctypes.c_void_p), ("o", ctypes.c_void_p), ("z", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("dout_strides", ctypes.c_int64 * 4),
        ("o_strides", ctypes.c_int64 * 4), ("dq_strides", ctypes.c_int64 * 4),
        ("dk_strides", ctypes.c_int64 * 4), ("dv_strides", ctypes.c_int64 * 4),
        ("z_strides", ctypes.c_int64 * 3),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("v_cols", ctypes.c_int32), ("segments", ctypes.c_int32),
    ]


class HedgehogParams(ctypes.Structure):  # tk_hedgehog_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int32),
        ("normalize", ctypes.c_int32), ("scale", ctypes.c_float), ("eps", ctypes.c_float),
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("seq", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("z", ctypes.c_void_p),
        ("wq", ctypes.c_void_p), ("wk", ctypes.c_void_p),
        ("bq", ctypes.c_void_p), ("bk", ctypes.c_void_p), ("per_head", ctypes.c_int32),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("o_strides", ctypes.c_int64 * 4),
        ("z_strides", ctypes.c_int64 * 3), ("v_cols", ctypes.c_int32), ("warps", ctypes.c_int32),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("segments", ctypes.c_int32), ("fused_maps", ctypes.c_int32),
    ]


class HedgehogBwdParams(ctypes.Structure):  # tk_hedgehog_bwd_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int32),
        ("normalize", ctypes.c_int32), ("per_head", ctypes.c_int32),
        ("scale", ctypes.c_float), ("eps", ctypes.c_float),
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("seq", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("dout", ctypes.c_void_p), ("o", ctypes.c_void_p), ("z", ctypes.c_void_p),
        ("wq", ctypes.c_void_p), ("wk", ctypes.c_void_p),
        ("bq", ctypes.c_void_p), ("bk", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
        ("dwq", ctypes.c_void_p), ("dwk", ctypes.c_void_p),
        ("dbq", ctypes.c_void_p), ("dbk", ctypes.c_void_p),
        ("q_strides", ctypes.c_int64 * 4), ("k_strides", ctypes.c_int64 * 4),
        ("v_strides", ctypes.c_int64 * 4), ("dout_strides", ctypes.c_int64 * 4),
        ("o_strides", ctypes.c_int64 * 4), ("dq_strides", ctypes.c_int64 * 4),
        ("dk_strides", ctypes.c_int64 * 4), ("dv_strides", ctypes.c_int64 * 4),
        ("z_strides", ctypes.c_int64 * 3),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("fused_maps", ctypes.c_int32),
    ]


class AdamwConfig(ctypes.Structure):  # tk_adamw_config (the run API reads warps and cols)
    _fields_ = [(n, ctypes.c_int) for n in
                ("part", "grad_dtype", "lowp_dtype", "clip", "warps", "cols")]


class GradNormParams(ctypes.Structure):  # tk_grad_norm_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("grad_dtype", ctypes.c_int), ("n", ctypes.c_int64),
        ("grad", ctypes.c_void_p), ("norm", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("width", ctypes.c_int64), ("config", ctypes.POINTER(AdamwConfig)),
    ]


class AdamwParams(ctypes.Structure):  # tk_adamw_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("grad_dtype", ctypes.c_int),
        ("lowp_dtype", ctypes.c_int), ("n", ctypes.c_int64),
        ("weight", ctypes.c_void_p), ("m", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("grad", ctypes.c_void_p), ("weight_lowp", ctypes.c_void_p),
        ("grad_norm", ctypes.c_void_p), ("max_norm", ctypes.c_float),
        ("lr", ctypes.c_float), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
        ("eps", ctypes.c_float), ("weight_decay", ctypes.c_float),
        ("step", ctypes.c_int64), ("width", ctypes.c_int64),
        ("config", ctypes.POINTER(AdamwConfig)),
    ]


class XentConfig(ctypes.Structure):  # tk_xent_config (the run API reads split, warps, cols)
    _fields_ = [(n, ctypes.c_int) for n in
                ("dtype", "part", "backward", "per_row_scale", "lse", "mean", "split", "warps",
                 "cols")]


class XentParams(ctypes.Structure):  # tk_xent_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("ignore_index", ctypes.c_int32),
        ("dtype", ctypes.c_int), ("rows", ctypes.c_int64), ("vocab", ctypes.c_int64),
        ("logits", ctypes.c_void_p), ("targets", ctypes.c_void_p), ("dlogits", ctypes.c_void_p),
        ("dloss", ctypes.c_void_p), ("dloss_scale", ctypes.c_float),
        ("loss", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("loss_mean", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("logits_stride", ctypes.c_int64), ("dlogits_stride", ctypes.c_int64),
        ("config", ctypes.POINTER(XentConfig)),
    ]


class EmbeddingParams(ctypes.Structure):  # tk_embedding_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("weight_dtype", ctypes.c_int),
        ("batch", ctypes.c_int64), ("seq", ctypes.c_int64), ("channels", ctypes.c_int64),
        ("vocab", ctypes.c_int64), ("max_seq", ctypes.c_int64),
        ("tokens", ctypes.c_void_p), ("wte", ctypes.c_void_p), ("wpe", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("wte_stride", ctypes.c_int64), ("wpe_stride", ctypes.c_int64),
        ("out_stride", ctypes.c_int64),
    ]


class EmbeddingBwdParams(ctypes.Structure):  # tk_embedding_bwd_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("accumulate", ctypes.c_int),
        ("batch", ctypes.c_int64), ("seq", ctypes.c_int64), ("channels", ctypes.c_int64),
        ("vocab", ctypes.c_int64), ("max_seq", ctypes.c_int64),
        ("tokens", ctypes.c_void_p), ("dout", ctypes.c_void_p), ("dwte", ctypes.c_void_p),
        ("dwpe", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("dout_stride", ctypes.c_int64), ("dwte_stride", ctypes.c_int64),
        ("dwpe_stride", ctypes.c_int64),
    ]


class BiasGradParams(ctypes.Structure):  # tk_bias_grad_params
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("accumulate", ctypes.c_int),
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("dy", ctypes.c_void_p),
        ("dy_stride", ctypes.c_int64), ("dbias", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
    ]


class PrepareInfo(ctypes.Structure):
    _fields_ = [("origin", ctypes.c_int), ("ms", ctypes.c_double), ("arch", ctypes.c_char * 16)]


class TK:
    def __init__(self, libdir):
        self.lib = ctypes.CDLL(os.path.join(libdir, "libtk.so"))
        L = self.lib
        L.tk_ctx_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        L.tk_ctx_error.restype = ctypes.c_char_p
        L.tk_ctx_error.argtypes = [ctypes.c_void_p]
        L.tk_attention_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionParams),
                                           ctypes.c_void_p]
        L.tk_attention_forward_workspace.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(AttentionParams), ctypes.POINTER(ctypes.c_size_t)]
        L.tk_attention_prepare.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionParams),
                                           ctypes.POINTER(PrepareInfo)]
        L.tk_attention_backward.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionBwdParams),
                                            ctypes.c_void_p]
        L.tk_attention_backward_prepare.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(AttentionBwdParams), ctypes.POINTER(PrepareInfo)]
        L.tk_attention_backward_workspace.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(AttentionBwdParams), ctypes.POINTER(ctypes.c_size_t)]
        L.tk_gemm.argtypes = [ctypes.c_void_p, ctypes.POINTER(GemmParams), ctypes.c_void_p]
        L.tk_gemm_config_for_call.restype = GemmConfig
        L.tk_gemm_config_for_call.argtypes = [ctypes.POINTER(GemmParams), ctypes.c_char_p]
        L.tk_gpu_arch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        L.tk_gemm_prepare.argtypes = [ctypes.c_void_p, ctypes.POINTER(GemmParams),
                                      ctypes.POINTER(PrepareInfo)]
        L.tk_gemm_workspace.argtypes = [ctypes.c_void_p, ctypes.POINTER(GemmParams),
                                        ctypes.POINTER(ctypes.c_size_t)]
        for fn, st in (("tk_norm_forward", NormParams), ("tk_norm_backward", NormBwdParams)):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(st), ctypes.c_void_p]
        L.tk_rotary.argtypes = [ctypes.c_void_p, ctypes.POINTER(RotaryParams), ctypes.c_void_p]
        L.tk_based_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(BasedParams),
                                       ctypes.c_void_p]
        L.tk_based_prepare.argtypes = [ctypes.c_void_p, ctypes.POINTER(BasedParams),
                                       ctypes.POINTER(PrepareInfo)]
        L.tk_based_forward_workspace.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(BasedParams), ctypes.POINTER(ctypes.c_size_t)]
        for fn, arg in (("tk_based_backward", ctypes.c_void_p),
                        ("tk_based_backward_prepare", ctypes.POINTER(PrepareInfo)),
                        ("tk_based_backward_workspace", ctypes.POINTER(ctypes.c_size_t))):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(BasedBwdParams), arg]
        for fn, arg in (("tk_hedgehog_forward", ctypes.c_void_p),
                        ("tk_hedgehog_prepare", ctypes.POINTER(PrepareInfo))):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(HedgehogParams), arg]
        if hasattr(L, "tk_hedgehog_forward_workspace"):  # a library from before segments loads
            L.tk_hedgehog_forward_workspace.argtypes = [
                ctypes.c_void_p, ctypes.POINTER(HedgehogParams), ctypes.POINTER(ctypes.c_size_t)]
        for fn, arg in (("tk_hedgehog_backward", ctypes.c_void_p),
                        ("tk_hedgehog_backward_prepare", ctypes.POINTER(PrepareInfo)),
                        ("tk_hedgehog_backward_workspace", ctypes.POINTER(ctypes.c_size_t))):
            if hasattr(L, fn):  # a library from before the Hedgehog backward still loads
                getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(HedgehogBwdParams),
                                           arg]
        L.tk_norm_backward_workspace.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(NormBwdParams), ctypes.POINTER(ctypes.c_size_t)]
        self.ctx = ctypes.c_void_p()
        self._check(L.tk_ctx_create(ctypes.byref(self.ctx)), "tk_ctx_create")

    def _check(self, status, what):
        if status != 0:
            msg = self.lib.tk_ctx_error(self.ctx).decode() if self.ctx else ""
            raise RuntimeError(f"{what}: status {status}: {msg}")

    @staticmethod
    def _strides(t):
        return (ctypes.c_int64 * 4)(*t.stride())

    def attention_params(self, q, k, v, o, lse, causal, bhnd=True, kernel=0):
        """q/k/v/o are torch tensors in logical [B,H,N,D] order (any strides); kernel:
        0 the library's choice, 1 mma.sync, 2 the Hopper (wgmma) kernel."""
        p = AttentionParams(struct_size=ctypes.sizeof(AttentionParams), kernel=kernel)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.head_dim, p.causal, p.scale = q.shape[3], int(causal), 0.0
        p.batch, p.heads_q, p.seq_q = q.shape[0], q.shape[1], q.shape[2]
        p.heads_kv, p.seq_kv = k.shape[1], k.shape[2]
        p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        p.lse = lse.data_ptr() if lse is not None else None
        p.q_strides, p.k_strides = self._strides(q), self._strides(k)
        p.v_strides, p.o_strides = self._strides(v), self._strides(o)
        if lse is not None:
            p.lse_strides = (ctypes.c_int64 * 3)(*lse.stride())
        return p

    def attention_workspace(self, p):
        """Bytes of workspace tk_attention_forward may use for p (decoding's splits)."""
        n = ctypes.c_size_t(0)
        self._check(self.lib.tk_attention_forward_workspace(self.ctx, ctypes.byref(p),
                                                            ctypes.byref(n)),
                    "tk_attention_forward_workspace")
        return n.value

    def attention_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_attention_prepare(self.ctx, ctypes.byref(p), ctypes.byref(info)),
                    "tk_attention_prepare")
        return info

    def attention(self, p, stream):
        self._check(self.lib.tk_attention_forward(self.ctx, ctypes.byref(p), stream),
                    "tk_attention_forward")

    def attention_bwd_params(self, q, k, v, o, lse, do, dq, dk, dv, causal, kernel=0, mode=0):
        """Torch tensors in logical [B,H,N,D] order (any strides); kernel: 0 the
        library's choice, 1 mma.sync, 2 the Hopper (wgmma) kernels; mode: 0
        deterministic, 1 fast (dQ through atomics); the workspace (D =
        rowsum(dO*O), f32, and the fast mode's accumulator) is allocated here with
        torch and kept on the returned struct (p.keep) so it lives as long as p."""
        import torch
        p = AttentionBwdParams(struct_size=ctypes.sizeof(AttentionBwdParams), mode=mode)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.head_dim, p.causal, p.scale = q.shape[3], int(causal), 0.0
        p.batch, p.heads_q, p.seq_q = q.shape[0], q.shape[1], q.shape[2]
        p.heads_kv, p.seq_kv, p.kernel = k.shape[1], k.shape[2], kernel
        ts = {"q": q, "k": k, "v": v, "o": o, "dout": do, "dq": dq, "dk": dk, "dv": dv}
        for name, t in ts.items():
            setattr(p, name, t.data_ptr())
            setattr(p, name + "_strides", self._strides(t))
        p.lse, p.lse_strides = lse.data_ptr(), (ctypes.c_int64 * 3)(*lse.stride())
        n = ctypes.c_size_t()
        self._check(self.lib.tk_attention_backward_workspace(self.ctx, ctypes.byref(p),
                                                             ctypes.byref(n)),
                    "tk_attention_backward_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=q.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes = ws.data_ptr(), n.value
        p.keep = ws
        return p

    def attention_backward_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_attention_backward_prepare(self.ctx, ctypes.byref(p),
                                                           ctypes.byref(info)),
                    "tk_attention_backward_prepare")
        return info

    def attention_backward(self, p, stream):
        self._check(self.lib.tk_attention_backward(self.ctx, ctypes.byref(p), stream),
                    "tk_attention_backward")

    def gemm_params(self, a, b, c, transpose_b, shape=None, cluster=0):
        """shape: optional (block_m, block_n, block_k, warps, stages[, tma[, wgmma]]); None =
        the library's choice for the call and GPU (tk_gemm_config_for_call). cluster: 2 runs
        the wgmma kernel's blocks in pairs sharing B (tk_gemm_config.cluster)."""
        p = GemmParams(struct_size=ctypes.sizeof(GemmParams))
        p.in_dtype = TK_BF16 if str(a.dtype) == "torch.bfloat16" else TK_F16
        p.out_dtype = {"torch.bfloat16": TK_BF16, "torch.float16": TK_F16,
                       "torch.float32": TK_F32}[str(c.dtype)]
        p.transpose_b = int(transpose_b)
        p.m, p.k = a.shape
        p.n = b.shape[0] if transpose_b else b.shape[1]
        p.a, p.b, p.c = a.data_ptr(), b.data_ptr(), c.data_ptr()
        p.lda, p.ldb, p.ldc = a.stride(0), b.stride(0), c.stride(0)
        if shape is not None:
            cfg = GemmConfig(p.in_dtype, p.out_dtype, p.transpose_b, *shape)
            cfg.cluster = cluster
            p.config = ctypes.pointer(cfg)  # the pointer keeps cfg alive
        return p

    def gemm_epilogue_params(self, a, b, c, transpose_a=False, transpose_b=False, bias=None,
                             act=0, aux=None, accumulate=False, workspace=None, split_k=0):
        """tk_gemm_params of C = op(A)·op(B) [+ C] [+ bias], then act (0 none, 1 GELU,
        2 DGELU) with aux; a is [K, M] with transpose_a, b [N, K] with transpose_b; 2-D
        torch tensors with unit column stride, bias [N] and aux [M, N] in C's dtype.
        workspace: a torch tensor the split over K may use (split_k 0: the library's S)."""
        p = GemmParams(struct_size=ctypes.sizeof(GemmParams))
        p.in_dtype = TK_BF16 if str(a.dtype) == "torch.bfloat16" else TK_F16
        p.out_dtype = {"torch.bfloat16": TK_BF16, "torch.float16": TK_F16,
                       "torch.float32": TK_F32}[str(c.dtype)]
        p.transpose_a, p.transpose_b = int(transpose_a), int(transpose_b)
        p.m, p.n = c.shape
        p.k = a.shape[0] if transpose_a else a.shape[1]
        p.a, p.b, p.c = a.data_ptr(), b.data_ptr(), c.data_ptr()
        p.lda, p.ldb, p.ldc = a.stride(0), b.stride(0), c.stride(0)
        p.bias, p.aux = self._ptr(bias), self._ptr(aux)
        p.ldaux = aux.stride(0) if aux is not None else 0
        p.act, p.accumulate = act, int(accumulate)
        if workspace is not None:
            p.workspace = workspace.data_ptr()
            p.workspace_bytes = workspace.numel() * workspace.element_size()
        p.split_k = split_k
        return p

    def gemm_choice(self, p):
        """The kernel tk_gemm uses for p when p names none, e.g. '128x256x128 w8 s2 tma'
        (' split 3' with a workspace that splits: tk_gemm_config_for_call plans for 132 SMs)."""
        arch = ctypes.create_string_buffer(16)
        self._check(self.lib.tk_gpu_arch(self.ctx, arch, 16), "tk_gpu_arch")
        c = self.lib.tk_gemm_config_for_call(ctypes.byref(p), arch.value)
        return (f"{c.block_m}x{c.block_n}x{c.block_k} w{c.warps} s{c.stages}" +
                (" tma" if c.tma else "") + (" wgmma" if c.wgmma else "") +
                (f" split {c.split_k}" if c.split_k >= 2 else ""))

    def gemm_workspace(self, p):
        """tk_gemm_workspace: the bytes p's split needs on this GPU (0: none)."""
        n = ctypes.c_size_t(0)
        self._check(self.lib.tk_gemm_workspace(self.ctx, ctypes.byref(p), ctypes.byref(n)),
                    "tk_gemm_workspace")
        return n.value

    def gemm_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_gemm_prepare(self.ctx, ctypes.byref(p), ctypes.byref(info)),
                    "tk_gemm_prepare")
        return info

    def gemm(self, p, stream):
        self._check(self.lib.tk_gemm(self.ctx, ctypes.byref(p), stream), "tk_gemm")

    @staticmethod
    def _ptr(t):
        return t.data_ptr() if t is not None else None

    def norm_params(self, kind, x, y, residual=None, h=None, weight=None, bias=None,
                    mean=None, rstd=None, eps=1e-5):
        """kind: 0 LayerNorm, 1 RMSNorm; 2-D torch tensors [rows, cols], any row pitch."""
        p = NormParams(struct_size=ctypes.sizeof(NormParams), kind=kind, eps=eps)
        p.dtype = TK_BF16 if str(x.dtype) == "torch.bfloat16" else TK_F16
        p.rows, p.cols = x.shape
        for name, t in (("x", x), ("residual", residual), ("weight", weight), ("bias", bias),
                        ("h", h), ("y", y), ("mean", mean), ("rstd", rstd)):
            setattr(p, name, self._ptr(t))
        for name, t in (("x", x), ("residual", residual), ("h", h), ("y", y)):
            if t is not None:
                setattr(p, name + "_stride", t.stride(0))
        return p

    @staticmethod
    def norm_shape(p, warps, cols):
        """Makes p (either params struct) run the block shape (warps, cols)."""
        cfg = NormConfig(warps=warps, cols=cols)
        p.config, p.keep_cfg = ctypes.pointer(cfg), cfg

    def norm_forward(self, p, stream):
        self._check(self.lib.tk_norm_forward(self.ctx, ctypes.byref(p), stream), "tk_norm_forward")

    def norm_bwd_params(self, kind, h, dy, dx, mean, rstd, dh=None, weight=None, dweight=None,
                        dbias=None):
        """The workspace is allocated here with torch and kept on p (p.keep)."""
        import torch
        p = NormBwdParams(struct_size=ctypes.sizeof(NormBwdParams), kind=kind)
        p.dtype = TK_BF16 if str(h.dtype) == "torch.bfloat16" else TK_F16
        p.rows, p.cols = h.shape
        for name, t in (("h", h), ("dy", dy), ("dh", dh), ("weight", weight), ("mean", mean),
                        ("rstd", rstd), ("dx", dx), ("dweight", dweight), ("dbias", dbias)):
            setattr(p, name, self._ptr(t))
        for name, t in (("h", h), ("dy", dy), ("dh", dh), ("dx", dx)):
            if t is not None:
                setattr(p, name + "_stride", t.stride(0))
        g = dweight if dweight is not None else dbias
        if g is not None:
            p.grad_dtype = _DT[{"torch.bfloat16": "bf16", "torch.float16": "f16",
                                "torch.float32": "f32"}[str(g.dtype)]]
        n = ctypes.c_size_t()
        self._check(self.lib.tk_norm_backward_workspace(self.ctx, ctypes.byref(p), ctypes.byref(n)),
                    "tk_norm_backward_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=h.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def norm_backward(self, p, stream):
        self._check(self.lib.tk_norm_backward(self.ctx, ctypes.byref(p), stream),
                    "tk_norm_backward")

    def rotary_params(self, q, q_out, k=None, k_out=None, style=0, rotary_dim=0, inverse=0,
                      cos=None, sin=None, positions=None, base=0.0):
        """q, k: 4-D torch views [B, H, N, D] (any strides: a [B, N, H, D] tensor's
        .transpose(1, 2)); q_out is q for in place. cos, sin: f32 [rows, rd/2];
        positions: int32 [B, N]."""
        p = RotaryParams(struct_size=ctypes.sizeof(RotaryParams), style=style,
                         rotary_dim=rotary_dim, inverse=inverse, base=base)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.batch, p.heads_q, p.seq, p.head_dim = q.shape
        p.heads_k = k.shape[1] if k is not None else 0
        for name, t in (("q", q), ("k", k), ("q_out", q_out), ("k_out", k_out)):
            setattr(p, name, self._ptr(t))
            if t is not None:
                setattr(p, name + "_strides", (ctypes.c_int64 * 4)(*t.stride()))
        p.cos, p.sin, p.positions = self._ptr(cos), self._ptr(sin), self._ptr(positions)
        p.table_rows = cos.shape[0] if cos is not None else 0
        return p

    def rotary(self, p, stream):
        self._check(self.lib.tk_rotary(self.ctx, ctypes.byref(p), stream), "tk_rotary")

    def based_params(self, q, k, v, o, z=None, normalize=1, scale=0.0, eps=0.0, v_cols=0,
                     segments=0):
        """Based linear attention forward. q, k [B, H, T, 16], v, o [B, H, T, Dv]: torch
        views in logical (batch, head, token, dim) order, any strides with the dim's 1 (fla's
        [B, T, H, D] tensor's .transpose(1, 2)); z: None or f32 [B, H, T] (any strides).
        scale, eps 0: the library's 1/4 and 1e-6; v_cols, segments 0: the library's choice
        (the workspace the segments need is allocated here and kept on the struct)."""
        import torch
        p = BasedParams(struct_size=ctypes.sizeof(BasedParams), normalize=normalize,
                        scale=scale, eps=eps, v_cols=v_cols, segments=segments)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.batch, p.heads, p.seq, p.head_dim_v = v.shape
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            setattr(p, name, t.data_ptr())
            setattr(p, name + "_strides", self._strides(t))
        if z is not None:
            p.z, p.z_strides = z.data_ptr(), (ctypes.c_int64 * 3)(*z.stride())
        n = ctypes.c_size_t()
        self._check(self.lib.tk_based_forward_workspace(self.ctx, ctypes.byref(p),
                                                        ctypes.byref(n)),
                    "tk_based_forward_workspace")
        if n.value:
            ws = torch.empty(n.value // 4, device=q.device, dtype=torch.float32)
            p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def based_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_based_prepare(self.ctx, ctypes.byref(p), ctypes.byref(info)),
                    "tk_based_prepare")
        return info

    def based_forward(self, p, stream):
        self._check(self.lib.tk_based_forward(self.ctx, ctypes.byref(p), stream),
                    "tk_based_forward")

    def based_bwd_params(self, q, k, v, dout, dq, dk, dv, o=None, z=None, normalize=1,
                         scale=0.0, eps=0.0, v_cols=0, segments=0):
        """Based backward: dq, dk, dv from dout (tensors as in based_params; dq, dk like q,
        dv like v); a normalized forward's o and z (f32 [B, H, T]) are required. The
        workspace is allocated here and kept on the returned struct."""
        import torch
        p = BasedBwdParams(struct_size=ctypes.sizeof(BasedBwdParams), normalize=normalize,
                           scale=scale, eps=eps, v_cols=v_cols, segments=segments)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.batch, p.heads, p.seq, p.head_dim_v = v.shape
        for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout), ("o", o),
                        ("dq", dq), ("dk", dk), ("dv", dv)):
            if t is not None:
                setattr(p, name, t.data_ptr())
                setattr(p, name + "_strides", self._strides(t))
        if z is not None:
            p.z, p.z_strides = z.data_ptr(), (ctypes.c_int64 * 3)(*z.stride())
        n = ctypes.c_size_t()
        self._check(self.lib.tk_based_backward_workspace(self.ctx, ctypes.byref(p),
                                                         ctypes.byref(n)),
                    "tk_based_backward_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=q.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def based_backward(self, p, stream):
        self._check(self.lib.tk_based_backward(self.ctx, ctypes.byref(p), stream),
                    "tk_based_backward")

    def hedgehog_params(self, q, k, v, o, wq, wk, bq=None, bk=None, z=None, normalize=1,
                        scale=0.0, eps=0.0, v_cols=0, warps=0, segments=0, fused_maps=0):
        """Hedgehog linear attention forward. q, k [B, H, T, D] (D 64 or 128), v, o [B, H, T,
        Dv]: torch views in logical (batch, head, token, dim) order, any strides with the
        dim's 1 (fla's [B, T, H, D] tensor's .transpose(1, 2)). wq, wk: the feature maps'
        nn.Linear weights [D, D] (or [H, D, D]: one per head), bq, bk their biases [D]
        ([H, D]) or None, contiguous, in the dtype. z: None or f32 [B, H, T] (any strides).
        scale 0: 1; eps 0: 1e-6; v_cols, warps, segments 0: the library's choice; fused_maps
        1: the feature maps inside the forward kernel (0: apart, into the workspace). The
        weights and the workspace (allocated here) are kept on the struct (p holds only their
        addresses)."""
        import torch
        p = HedgehogParams(struct_size=ctypes.sizeof(HedgehogParams), normalize=normalize,
                           scale=scale, eps=eps, v_cols=v_cols, warps=warps, segments=segments,
                           fused_maps=fused_maps)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.batch, p.heads, p.seq, p.head_dim_v = v.shape
        p.head_dim = q.shape[-1]
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            setattr(p, name, t.data_ptr())
            setattr(p, name + "_strides", self._strides(t))
        ws = [w.contiguous() for w in (wq, wk, bq, bk) if w is not None]
        p.per_head = int(wq.dim() == 3)
        p.wq, p.wk = ws[0].data_ptr(), ws[1].data_ptr()
        if bq is not None:
            p.bq, p.bk = ws[2].data_ptr(), ws[3].data_ptr()
        if z is not None:
            p.z, p.z_strides = z.data_ptr(), (ctypes.c_int64 * 3)(*z.stride())
        p.keep = ws
        n = ctypes.c_size_t()
        if hasattr(self.lib, "tk_hedgehog_forward_workspace"):
            self._check(self.lib.tk_hedgehog_forward_workspace(self.ctx, ctypes.byref(p),
                                                               ctypes.byref(n)),
                        "tk_hedgehog_forward_workspace")
        if n.value:
            st = torch.empty(n.value // 4, device=q.device, dtype=torch.float32)
            p.workspace, p.workspace_bytes = st.data_ptr(), n.value
            p.keep = ws + [st]
        return p

    def hedgehog_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_hedgehog_prepare(self.ctx, ctypes.byref(p), ctypes.byref(info)),
                    "tk_hedgehog_prepare")
        return info

    def hedgehog_forward(self, p, stream):
        self._check(self.lib.tk_hedgehog_forward(self.ctx, ctypes.byref(p), stream),
                    "tk_hedgehog_forward")

    def hedgehog_bwd_params(self, q, k, v, dout, dq, dk, dv, wq, wk, dwq, dwk, bq=None, bk=None,
                            dbq=None, dbk=None, o=None, z=None, normalize=1, scale=0.0, eps=0.0,
                            fused_maps=0):
        """Hedgehog backward: dq, dk [B, H, T, D], dv [B, H, T, Dv] from dout [B, H, T, Dv]
        (torch views as in hedgehog_params, any strides with the dim's 1; dq, dk like q, dv
        like v); wq, wk, bq, bk as in hedgehog_params (kept on the struct, contiguous); dwq,
        dwk (the weights' shape) and, with a bias, dbq, dbk (the biases'): dense, in the
        dtype. A normalized forward's o and z (f32 [B, H, T], any strides) are required.
        normalize, scale, eps as in the forward's call (0: 1 and 1e-6); fused_maps 1: the
        feature maps inside the kernels (0: apart, in the workspace). The workspace is
        allocated here with torch and kept on the returned struct (p.keep)."""
        import torch
        for name, t in (("dwq", dwq), ("dwk", dwk), ("dbq", dbq), ("dbk", dbk)):
            if t is not None and not t.is_contiguous():
                raise ValueError(f"hedgehog_bwd_params: {name} must be dense")
        p = HedgehogBwdParams(struct_size=ctypes.sizeof(HedgehogBwdParams), normalize=normalize,
                              scale=scale, eps=eps, fused_maps=fused_maps)
        p.dtype = TK_BF16 if str(q.dtype) == "torch.bfloat16" else TK_F16
        p.batch, p.heads, p.seq, p.head_dim_v = v.shape
        p.head_dim = q.shape[-1]
        for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout), ("o", o),
                        ("dq", dq), ("dk", dk), ("dv", dv)):
            if t is not None:
                setattr(p, name, t.data_ptr())
                setattr(p, name + "_strides", self._strides(t))
        ws = [w.contiguous() for w in (wq, wk, bq, bk) if w is not None]
        p.per_head = int(wq.dim() == 3)
        p.wq, p.wk = ws[0].data_ptr(), ws[1].data_ptr()
        if bq is not None:
            p.bq, p.bk = ws[2].data_ptr(), ws[3].data_ptr()
        p.dwq, p.dwk, p.dbq, p.dbk = (self._ptr(t) for t in (dwq, dwk, dbq, dbk))
        if z is not None:
            p.z, p.z_strides = z.data_ptr(), (ctypes.c_int64 * 3)(*z.stride())
        n = ctypes.c_size_t()
        self._check(self.lib.tk_hedgehog_backward_workspace(self.ctx, ctypes.byref(p),
                                                            ctypes.byref(n)),
                    "tk_hedgehog_backward_workspace")
        buf = torch.empty(max((n.value + 3) // 4, 1), device=q.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes = buf.data_ptr(), n.value
        p.keep = ws + [buf]
        return p

    def hedgehog_backward_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_hedgehog_backward_prepare(self.ctx, ctypes.byref(p),
                                                          ctypes.byref(info)),
                    "tk_hedgehog_backward_prepare")
        return info

    def hedgehog_backward(self, p, stream):
        self._check(self.lib.tk_hedgehog_backward(self.ctx, ctypes.byref(p), stream),
                    "tk_hedgehog_backward")

    # ---- the optimizer step (tk_grad_norm, tk_adamw) ----
    def _adamw_bind(self):
        """Declares the optimizer step's entry points once (pointers must not be truncated
        to C ints); a library without them raises AttributeError here."""
        if getattr(self, "_adamw_bound", False):
            return
        L, size = self.lib, ctypes.POINTER(ctypes.c_size_t)
        for fn, st, arg in (("tk_grad_norm", GradNormParams, ctypes.c_void_p),
                            ("tk_grad_norm_workspace", GradNormParams, size),
                            ("tk_adamw", AdamwParams, ctypes.c_void_p)):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(st), arg]
        self._adamw_bound = True

    @staticmethod
    def _tk_dtype(t):
        return _DT[{"torch.bfloat16": "bf16", "torch.float16": "f16",
                    "torch.float32": "f32"}[str(t.dtype)]]

    def grad_norm_params(self, grad, norm, width=0):
        """‖grad‖ (a flat torch tensor, f32/bf16/f16) into norm (f32, one element, on the
        device). The workspace is allocated here with torch and kept on p (p.keep)."""
        import torch
        self._adamw_bind()
        p = GradNormParams(struct_size=ctypes.sizeof(GradNormParams), width=width)
        p.grad_dtype, p.n = self._tk_dtype(grad), grad.numel()
        p.grad, p.norm = grad.data_ptr(), norm.data_ptr()
        n = ctypes.c_size_t()
        self._check(self.lib.tk_grad_norm_workspace(self.ctx, ctypes.byref(p), ctypes.byref(n)),
                    "tk_grad_norm_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=grad.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def grad_norm(self, p, stream):
        self._check(self.lib.tk_grad_norm(self.ctx, ctypes.byref(p), stream), "tk_grad_norm")

    def adamw_params(self, weight, m, v, grad, weight_lowp=None, grad_norm=None, max_norm=0.0,
                     lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1,
                     width=0):
        """One AdamW step on flat torch tensors: weight, m, v f32 (updated in place), grad
        f32/bf16/f16, weight_lowp bf16/f16 (written) or None; grad_norm: tk_grad_norm's
        output (a one-element f32 tensor) or None (no clipping)."""
        self._adamw_bind()
        p = AdamwParams(struct_size=ctypes.sizeof(AdamwParams), max_norm=max_norm, lr=lr,
                        beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                        step=step, width=width)
        p.grad_dtype, p.n = self._tk_dtype(grad), weight.numel()
        p.weight, p.m, p.v, p.grad = (t.data_ptr() for t in (weight, m, v, grad))
        if weight_lowp is not None:
            p.weight_lowp, p.lowp_dtype = weight_lowp.data_ptr(), self._tk_dtype(weight_lowp)
        p.grad_norm = self._ptr(grad_norm)
        return p

    @staticmethod
    def adamw_shape(p, warps, cols):
        """Makes p (either struct) run the block shape (warps, cols) of its kernel."""
        cfg = AdamwConfig(warps=warps, cols=cols)
        p.config, p.keep_cfg = ctypes.pointer(cfg), cfg

    def adamw(self, p, stream):
        self._check(self.lib.tk_adamw(self.ctx, ctypes.byref(p), stream), "tk_adamw")

    # ---- softmax cross-entropy (tk_cross_entropy) ----
    def _xent_bind(self):
        """Declares tk_cross_entropy's entry points once (pointers must not be truncated to
        C ints); a library without them raises AttributeError here."""
        if getattr(self, "_xent_bound", False):
            return
        L = self.lib
        for fn, arg in (("tk_cross_entropy", ctypes.c_void_p),
                        ("tk_cross_entropy_prepare", ctypes.POINTER(PrepareInfo)),
                        ("tk_cross_entropy_workspace", ctypes.POINTER(ctypes.c_size_t))):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(XentParams), arg]
        self._xent_bound = True

    def xent_params(self, logits, targets, loss, dlogits=None, dloss=None, dloss_scale=1.0,
                    lse=None, loss_mean=None, ignore_index=-1):
        """Cross-entropy over 2-D torch logits [rows, vocab] (bf16/f16/f32, any row pitch)
        and int32 targets [rows]: loss (f32 [rows]) written; dlogits (the logits' dtype,
        may be logits itself) written with the gradient scaled by dloss (f32 [rows]) or
        dloss_scale; lse (f32 [rows]) and loss_mean (f32, one element) optional. The mean's
        workspace is allocated here with torch and kept on p (p.keep)."""
        import torch
        self._xent_bind()
        p = XentParams(struct_size=ctypes.sizeof(XentParams), ignore_index=ignore_index,
                       dloss_scale=dloss_scale)
        p.dtype = _DT[{"torch.bfloat16": "bf16", "torch.float16": "f16",
                       "torch.float32": "f32"}[str(logits.dtype)]]
        p.rows, p.vocab = logits.shape
        p.logits, p.logits_stride = logits.data_ptr(), logits.stride(0)
        p.targets, p.loss = targets.data_ptr(), loss.data_ptr()
        if dlogits is not None:
            p.dlogits, p.dlogits_stride = dlogits.data_ptr(), dlogits.stride(0)
        p.dloss, p.lse, p.loss_mean = self._ptr(dloss), self._ptr(lse), self._ptr(loss_mean)
        n = ctypes.c_size_t()
        self._check(self.lib.tk_cross_entropy_workspace(self.ctx, ctypes.byref(p),
                                                        ctypes.byref(n)),
                    "tk_cross_entropy_workspace")
        if n.value:
            ws = torch.empty(n.value // 4, device=logits.device, dtype=torch.float32)
            p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    @staticmethod
    def xent_shape(p, split, warps, cols):
        """Makes p run the row kernel's layout and block shape (split, warps, cols)."""
        cfg = XentConfig(split=split, warps=warps, cols=cols)
        p.config, p.keep_cfg = ctypes.pointer(cfg), cfg

    def xent_prepare(self, p):
        info = PrepareInfo()
        self._check(self.lib.tk_cross_entropy_prepare(self.ctx, ctypes.byref(p),
                                                      ctypes.byref(info)),
                    "tk_cross_entropy_prepare")
        return info

    def cross_entropy(self, p, stream):
        self._check(self.lib.tk_cross_entropy(self.ctx, ctypes.byref(p), stream),
                    "tk_cross_entropy")

    # ---- embeddings and the bias gradient (tk_embedding_*, tk_bias_grad) ----
    def _train_bind(self):
        """Declares the embedding and bias-gradient entry points once (pointers must not be
        truncated to C ints); a library without them raises AttributeError here."""
        if getattr(self, "_train_bound", False):
            return
        L, size, info = self.lib, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(PrepareInfo)
        for fn, st, arg in (("tk_embedding_forward", EmbeddingParams, ctypes.c_void_p),
                            ("tk_embedding_forward_prepare", EmbeddingParams, info),
                            ("tk_embedding_backward", EmbeddingBwdParams, ctypes.c_void_p),
                            ("tk_embedding_backward_prepare", EmbeddingBwdParams, info),
                            ("tk_embedding_backward_workspace", EmbeddingBwdParams, size),
                            ("tk_bias_grad", BiasGradParams, ctypes.c_void_p),
                            ("tk_bias_grad_prepare", BiasGradParams, info),
                            ("tk_bias_grad_workspace", BiasGradParams, size)):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(st), arg]
        self._train_bound = True

    def embedding_params(self, tokens, wte, out, wpe=None):
        """out[b, t] = wte[tokens[b, t]] + wpe[t] for torch tensors: tokens int32 [B, T],
        wte [V, C] and wpe [max_seq, C] (or None) in one float dtype, out [B, T, C] (any
        float dtype, rows of any pitch)."""
        self._train_bind()
        p = EmbeddingParams(struct_size=ctypes.sizeof(EmbeddingParams))
        p.dtype, p.weight_dtype = self._tk_dtype(out), self._tk_dtype(wte)
        (p.batch, p.seq), (p.vocab, p.channels) = tokens.shape, wte.shape
        p.tokens, p.wte, p.out = tokens.data_ptr(), wte.data_ptr(), out.data_ptr()
        p.wte_stride, p.out_stride = wte.stride(0), out.stride(1)
        if wpe is not None:
            p.wpe, p.max_seq, p.wpe_stride = wpe.data_ptr(), wpe.shape[0], wpe.stride(0)
        return p

    def embedding_forward(self, p, stream):
        self._check(self.lib.tk_embedding_forward(self.ctx, ctypes.byref(p), stream),
                    "tk_embedding_forward")

    def embedding_bwd_params(self, tokens, dout, dwte, dwpe=None, accumulate=1):
        """dwte[v] (+)= Σ dout[b, t] over tokens[b, t] = v, dwpe[t] (+)= Σ_b dout[b, t]
        (dwte, dwpe f32; dout bf16/f16/f32 [B, T, C]). The workspace is allocated here
        with torch and kept on p (p.keep)."""
        import torch
        self._train_bind()
        p = EmbeddingBwdParams(struct_size=ctypes.sizeof(EmbeddingBwdParams),
                               accumulate=accumulate)
        p.dtype = self._tk_dtype(dout)
        (p.batch, p.seq), (p.vocab, p.channels) = tokens.shape, dwte.shape
        p.tokens, p.dout, p.dwte = tokens.data_ptr(), dout.data_ptr(), dwte.data_ptr()
        p.dout_stride, p.dwte_stride = dout.stride(1), dwte.stride(0)
        if dwpe is not None:
            p.dwpe, p.max_seq, p.dwpe_stride = dwpe.data_ptr(), dwpe.shape[0], dwpe.stride(0)
        n = ctypes.c_size_t()
        self._check(self.lib.tk_embedding_backward_workspace(self.ctx, ctypes.byref(p),
                                                             ctypes.byref(n)),
                    "tk_embedding_backward_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=dout.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def embedding_backward(self, p, stream):
        self._check(self.lib.tk_embedding_backward(self.ctx, ctypes.byref(p), stream),
                    "tk_embedding_backward")

    def bias_grad_params(self, dy, dbias, accumulate=1):
        """dbias (f32 [N]) (+)= dy.sum(0) for a 2-D torch dy [M, N] (bf16/f16/f32, any row
        pitch). The workspace is allocated here with torch and kept on p (p.keep)."""
        import torch
        self._train_bind()
        p = BiasGradParams(struct_size=ctypes.sizeof(BiasGradParams), accumulate=accumulate)
        p.dtype, (p.rows, p.cols) = self._tk_dtype(dy), dy.shape
        p.dy, p.dy_stride, p.dbias = dy.data_ptr(), dy.stride(0), dbias.data_ptr()
        n = ctypes.c_size_t()
        self._check(self.lib.tk_bias_grad_workspace(self.ctx, ctypes.byref(p), ctypes.byref(n)),
                    "tk_bias_grad_workspace")
        ws = torch.empty(max(n.value // 4, 1), device=dy.device, dtype=torch.float32)
        p.workspace, p.workspace_bytes, p.keep = ws.data_ptr(), n.value, ws
        return p

    def bias_grad(self, p, stream):
        self._check(self.lib.tk_bias_grad(self.ctx, ctypes.byref(p), stream), "tk_bias_grad")
