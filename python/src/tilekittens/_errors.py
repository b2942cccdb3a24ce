"""The library's statuses (include/tk/tk.h) as Python exceptions.

Input problems (a bad argument, dtype or shape) are ValueErrors, so one
`except ValueError` catches every mistake a caller can fix, whether Python
or the C library found it; the rest (no driver, CUDA, compile failures) are
RuntimeErrors. Both carry the status, so a caller can tell them apart."""

# Enum values are ABI (tk.h never renumbers them).
OK = 0
INVALID_ARG, TYPE, SHAPE, SCOPE, STATE, NO_MEMORY, NO_DRIVER, CUDA = 1, 2, 3, 4, 5, 6, 7, 8
LLVM, PTXAS, CACHE, IO, UNSUPPORTED, LAUNCH, RUNTIME = 9, 10, 11, 12, 13, 14, 15

_INPUT_STATUSES = frozenset({INVALID_ARG, TYPE, SHAPE})


class TileKittensError(Exception):
    """A failed library call: `status` is the tk_status number, `status_name`
    its name (e.g. "TK_ERR_INVALID_ARG"); the message is the library's."""

    def __init__(self, message, status, status_name):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class InvalidArgumentError(TileKittensError, ValueError):
    """TK_ERR_INVALID_ARG, TK_ERR_TYPE or TK_ERR_SHAPE."""


class DeviceError(TileKittensError, RuntimeError):
    """Every other status: the driver, CUDA, the compiler, an unsupported target."""


def error_for(status, status_name, message):
    """The exception to raise for a failed call (status != OK)."""
    cls = InvalidArgumentError if status in _INPUT_STATUSES else DeviceError
    return cls(f"{message} [{status_name}]" if message else status_name, status, status_name)
