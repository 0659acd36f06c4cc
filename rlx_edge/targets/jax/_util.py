"""Helpers the jax rules share: window padding and taps (float compute types and activations are the ops' own)."""

from __future__ import annotations

from typing import Any

from rlx_edge.ir.ops import window_shape
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.jax._lazy import jnp, lax

Array = Any


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
