"""Tensor stand-ins for the tests that run without torch: what
tilekittens' argument checks read (shape, stride(), dtype, device,
data_ptr()), and nothing more; and Foreign, another framework's array."""
import math


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


bf16, f16, f32 = Dtype("bfloat16"), Dtype("float16"), Dtype("float32")


class Device:
    def __init__(self, kind="cuda", index=0):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class Tensor:
    def __init__(self, shape, strides=None, dtype=bf16, device=None):
        self.shape = tuple(shape)
        if strides is None:  # dense, row-major
            strides = tuple(math.prod(self.shape[i + 1:]) for i in range(len(self.shape)))
        self._strides = tuple(strides)
        self.dtype = dtype
        self.device = device or Device()

    def stride(self):
        return self._strides

    def data_ptr(self):
        return 0x10000

    def t(self):
        return Tensor(self.shape[::-1], self._strides[::-1], self.dtype, self.device)


class Foreign:
    """Another framework's array (CuPy, JAX, ...) over a tensor: only the
    DLPack protocol."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()
