"""Helpers the jax rules share: float compute types, activations, windows."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops import window_shape
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.jax._lazy import jnp, lax

Array = Any


def compute_dtype(dt: Any) -> Any:
    """As the float references: f64 computes in f64, everything else (f16, bf16, f32) in f32."""
    return jnp.float64 if np.dtype(dt) == np.float64 else jnp.float32


def finish(y: Array, dtype: DType) -> Array:
    """Cast a float result to an output dtype; bf16 values are rounded, then stored as float32."""
    if dtype == DType.bf16:
        return y.astype(jnp.bfloat16).astype(jnp.float32)
    return y.astype(dtype.numpy)


def activation(y: Array, act: str) -> Array:
    """A fused float activation (the references' ``apply_activation``)."""
    if act == "none":
        return y
    if act == "relu":
        return jnp.maximum(y, 0)
    if act == "relu6":
        return jnp.clip(y, 0, 6)
    if act == "relu_n1_to_1":
        return jnp.clip(y, -1, 1)
    raise AssertionError(act)


def resolved_pads(
    x: TensorType, kh: int, kw: int, strides: tuple, dilations: tuple, padding: str, pads: tuple
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from the graph's static input type, as the references resolve them."""
    _, _, p = window_shape(x, kh, kw, strides, dilations, padding, pads)
    return p


def pad_nhwc(x: Array, pads: tuple[int, int, int, int], value: Any = 0) -> Array:
    pt, pb, pl, pr = pads
    if not any(pads):
        return x
    return jnp.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=value)


def taps(xp: Array, kh: int, kw: int, strides: tuple, dilations: tuple, oh: int, ow: int) -> list[Array]:
    """For each kernel tap (row-major), the padded input pixels it meets at every output position."""
    n, _, _, c = xp.shape
    out = []
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilations[0], j * dilations[1]
            end = (n, r0 + (oh - 1) * strides[0] + 1, c0 + (ow - 1) * strides[1] + 1, c)
            out.append(lax.slice(xp, (0, r0, c0, 0), end, (1, strides[0], strides[1], 1)))
    return out


def out_hw(xp_shape: tuple, kh: int, kw: int, strides: tuple, dilations: tuple) -> tuple[int, int]:
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    return (xp_shape[1] - eh) // strides[0] + 1, (xp_shape[2] - ew) // strides[1] + 1
