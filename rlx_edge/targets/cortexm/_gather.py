"""Compile-time plans for the generic data-movement kernel (``kernels/rlx_gather.c``).

A data-movement op's own float reference, run on the input's element
numbers, says where each output element comes from (:func:`source_maps`).
:func:`walk` turns each map into the kernel's walk: a map made of nested evenly
spaced runs (slices, reversals, broadcasts, transposes, block moves) becomes
strides over at most six levels; anything else (mirrored edges, padding, most
gathers) becomes a table of rows whose elements are a fixed stride apart, or
of single elements. So one kernel serves every op that only moves values, and no op
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


def source_maps(op: str, shape: Sequence[int], attrs: dict, operands: Sequence[np.ndarray] = ()) -> list[np.ndarray]:
    """Per output, the input element (row-major number) each output element is, or FILL.

    The op's float reference runs on the numbers 1..n (and the node's other,
    constant, ``operands``: gather's indices): a data-movement op moves them
    unchanged and pads with 0, which becomes FILL.
    """
    numbers = np.arange(1, math.prod(shape) + 1, dtype=np.int64).reshape(tuple(shape))
    return [np.asarray(o, np.int64) - 1 for o in get_op(op).run_reference([numbers, *operands], attrs)]


@dataclass
class Walk:
    elem_bytes: int
    shape: list[int]  # rank 6
    stride: list[int]  # bytes, rank 6
    offset: int
    rows: np.ndarray | None  # byte offset per row (FILL for a filled row), or None

    def ints(self, rows_at: int) -> list[int]:
        return [self.elem_bytes, *self.shape, *self.stride, self.offset, rows_at]


def _levels(flat: np.ndarray) -> list[tuple[int, int]] | None:
    """The output, row-major, as nested evenly spaced runs: (count, step in elements) from the
    innermost out, or None where the map is not such a walk (or reads the fill).

    Each level takes the longest run the next element difference allows whose length divides
    what is left and repeats in every row, then walks the rows' first elements. Runs need not
    follow the output's own axes (space_to_depth's channels are two block offsets and a channel).
    """
    if np.any(flat == FILL):
        return None
    levels: list[tuple[int, int]] = []
    f = flat
    while f.size > 1:
        n = f.size
        step = int(f[1] - f[0])
        off = np.flatnonzero(np.diff(f) != step)
        run = int(off[0]) + 1 if off.size else n
        for d in (d for d in range(min(run, n), 1, -1) if n % d == 0):
            rows = f.reshape(n // d, d)
            if np.array_equal(rows, rows[:, :1] + step * np.arange(d)):
                break
        else:
            return None
        levels.append((d, step))
        f = rows[:, 0]
    return levels


def walk(src: np.ndarray, eb: int) -> Walk:
    """The kernel's walk for one source map of elements of ``eb`` bytes."""
    if src.size == 0:
        return Walk(eb, [1, 1, 1, 1, 1, 0], [0] * _RANK, 0, None)
    levels = _levels(src.reshape(-1))
    if levels is not None:
        web = eb
        while levels and levels[0][1] * eb == web:  # contiguous elements: one wider element
            web *= levels.pop(0)[0]
        if len(levels) <= _RANK:
            lead = _RANK - len(levels)
            outer = list(reversed(levels))
            shape = [1] * lead + [n for n, _ in outer]
            stride = [0] * lead + [s * eb for _, s in outer]
            return Walk(web, shape, stride, int(src.reshape(-1)[0]) * eb, None)
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
