"""Compile-time plans for the generic data-movement kernel (``kernels/rlx_gather.c``).

A data-movement op's own float reference, run on the input's element
numbers, says where each output element comes from (:func:`source_maps`).
:func:`walks` turns those maps into the kernel's walks: an affine map
(slices, reversals, broadcasts, block moves) becomes strides over at most six
merged axes; anything else (mirrored edges, crops of merged axes, padding)
becomes a table of rows whose elements are a fixed stride apart, or of single
elements. So one kernel serves every op that only moves values, and no op
needs C of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlx_edge.ir.ops import get_op

WALK_INTS = 15  # RLX_GATHER_WALK_INTS
_RANK = 6
FILL = -1  # a source of -1: the element is the op's fill (padding)


def source_maps(op: str, shape: Sequence[int], attrs: dict) -> list[np.ndarray]:
    """Per output, the input element (row-major number) each output element is, or FILL.

    The op's float reference runs on the numbers 1..n: a data-movement op
    moves them unchanged and pads with 0, which becomes FILL.
    """
    numbers = np.arange(1, math.prod(shape) + 1, dtype=np.int64).reshape(tuple(shape))
    return [np.asarray(o, np.int64) - 1 for o in get_op(op).run_reference([numbers], attrs)]


@dataclass
class Walk:
    elem_bytes: int
    shape: list[int]  # rank 6
    stride: list[int]  # bytes, rank 6
    offset: int
    rows: np.ndarray | None  # byte offset per row (FILL for a filled row), or None

    def ints(self, rows_at: int) -> list[int]:
        return [self.elem_bytes, *self.shape, *self.stride, self.offset, rows_at]


def _affine(src: np.ndarray) -> tuple[int, list[int]] | None:
    """(offset, strides in elements) when src == offset + sum_d i_d * stride_d everywhere."""
    if src.size == 0:
        return 0, [0] * src.ndim
    if np.any(src == FILL):
        return None
    offset = int(src.flat[0])
    strides = [int(src[tuple(1 if a == d else 0 for a in range(src.ndim))]) - offset if n > 1 else 0
               for d, n in enumerate(src.shape)]  # fmt: skip
    want = np.full(src.shape, offset, np.int64)
    for d, s in enumerate(strides):
        shape = [1] * src.ndim
        shape[d] = src.shape[d]
        want = want + s * np.arange(src.shape[d], dtype=np.int64).reshape(shape)
    return (offset, strides) if np.array_equal(want, src) else None


def _merged(shape: list[int], strides: list[int], eb: int) -> tuple[list[int], list[int], int]:
    """Fewer axes for the same walk (strides in bytes): size-1 axes dropped, an axis merged
    into the next where it continues it, and innermost contiguous runs folded into the element."""
    axes = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out: list[tuple[int, int]] = []
    for n, s in reversed(axes):  # innermost first
        if out and s == out[-1][1] * out[-1][0] and n and out[-1][0]:
            inner_n, inner_s = out.pop()
            out.append((n * inner_n, inner_s))
        else:
            out.append((n, s))
    out.reverse()
    while out and out[-1][1] == eb and out[-1][0]:  # contiguous elements: one wider element
        eb *= out.pop()[0]
    return [n for n, _ in out], [s for _, s in out], eb


def walk(src: np.ndarray, eb: int) -> Walk:
    """The kernel's walk for one source map of elements of ``eb`` bytes."""
    got = _affine(src)
    if got is not None:
        offset, strides = got
        shape, strides_b, web = _merged(list(src.shape), [s * eb for s in strides], eb)
        if src.size == 0:
            shape, strides_b, web = [0], [0], eb
        if len(shape) <= _RANK:
            lead = _RANK - len(shape)
            return Walk(web, [1] * lead + shape, [0] * lead + strides_b, offset * eb, None)
    # a table of rows: the innermost axis where every row is evenly spaced, else single elements
    rows2 = src.reshape(-1, src.shape[-1] if src.ndim else 1)
    step = _row_step(rows2)
    if step is None:
        rows2 = src.reshape(-1, 1)
        step = 0
    n_rows, length = rows2.shape
    first = rows2[:, 0]
    table = np.where(first == FILL, FILL, first * eb)
    web, stride5 = eb, step * eb
    if length > 1 and step == 1:  # contiguous rows: one wide element each
        web, length, stride5 = eb * length, 1, 0
    return Walk(web, [1, 1, 1, 1, n_rows, length], [0, 0, 0, 0, 0, stride5], 0, table)


def _row_step(rows: np.ndarray) -> int | None:
    """The element step shared by every row that is not all fill, or None (also for a mixed row)."""
    if rows.shape[1] <= 1:
        return 0
    filled = rows == FILL
    whole = filled.all(axis=1)
    if np.any(filled.any(axis=1) & ~whole):
        return None
    live = rows[~whole]
    if live.size == 0:
        return 0
    steps = np.diff(live, axis=1)
    step = int(steps[0, 0])
    return step if np.all(steps == step) else None


def kernel_tables(walks: Sequence[Walk]) -> tuple[np.ndarray, np.ndarray]:
    """The ``walks`` and ``rows`` arrays of rlx_gather_params."""
    ints: list[int] = []
    rows: list[np.ndarray] = []
    at = 0
    for w in walks:
        if w.rows is None:
            ints += w.ints(-1)
        else:
            ints += w.ints(at)
            rows.append(w.rows)
            at += w.rows.size
    table = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if np.any(np.abs(np.asarray(ints, np.int64)) >= 2**31) or np.any(np.abs(table) >= 2**31):
        raise ValueError("a byte offset does not fit int32")
    return np.asarray(ints, np.int32), table.astype(np.int32)
