"""The C library's float32 math functions (``tanhf``, ``erfcf``), for tables built as TFLite builds them.

TFLite's table activations (GELU) call ``std::tanh`` / ``std::erfc`` on floats, which
are the C library's ``tanhf`` / ``erfcf``; these are not correctly rounded (glibc 2.36's
``tanhf`` differs from the correctly rounded value on about 5 % of inputs in [-10, 10]), so a
table matches TFLite's bit for bit only when it calls the same functions. Prepare calls
them here; the Program then carries the table, so every target agrees with it whatever
the host. Where no C math library can be loaded, the functions are evaluated in float64 and
rounded once (what a correctly rounded library returns).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Callable

import numpy as np

_FALLBACK: dict[str, Callable[[float], float]] = {"tanhf": math.tanh, "erfcf": math.erfc}


@functools.cache
def _libm_function(name: str) -> Callable[[float], float]:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or None)
        fn = getattr(lib, name)
    except (OSError, AttributeError, TypeError):
        return _FALLBACK[name]
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def libm_f32(name: str, v: np.ndarray) -> np.ndarray:
    """``name`` ("tanhf" or "erfcf") of each float32 value, as the C library returns it."""
    fn = _libm_function(name)
    flat = np.asarray(v, np.float32).reshape(-1)
    out = np.fromiter((fn(float(x)) for x in flat), np.float64, flat.size).astype(np.float32)
    return out.reshape(np.shape(v))
