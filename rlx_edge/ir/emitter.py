"""The builder that autodiff rules (``@op.jvp``, ``@op.vjp``, ``@op.batch``) emit graph nodes with.

A rule never computes numbers: it adds nodes to the graph a transform is
producing, through an :class:`Emitter`. Every op of the registry is a method,
as on :class:`~rlx_edge.ir.graph.Graph` (``e.mul(a, b)``,
``e.conv2d(x, w, strides=(2, 2))``); nodes get fresh names under the
emitter's prefix. The helpers below are the pieces many rules share: numpy
broadcasting undone (:meth:`Emitter.sum_to`) and redone
(:meth:`Emitter.broadcast_to`), constants, 0/1 masks, the derivative of a
fused activation and interior padding (a transposed stride).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph, Tensor
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.shape import is_static


class Emitter:
    """Adds nodes to ``graph``; ``where`` names the node whose rule runs (for errors)."""

    def __init__(self, graph: Graph, prefix: str) -> None:
        self.graph = graph
        self.prefix = prefix
        self.where = ""
        self._consts: dict[tuple, Tensor] = {}

    # nodes -------------------------------------------------------------------
    def op(self, op: str, *inputs: Tensor | str | None, **attrs: Any) -> Any:
        """One node of ``op``; its output (a tuple of them for multi-output ops)."""
        outs = self.graph.add_node(op, inputs, attrs, name=self._fresh(op))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __getattr__(self, op: str) -> Any:
        if op.startswith("_") or op not in REGISTRY:
            raise AttributeError(op)

        def build(*inputs: Tensor | str | None, **attrs: Any) -> Any:
            return self.op(op, *inputs, **attrs)

        build.__name__ = op
        return build

    def fail(self, why: str) -> OpError:
        """An error naming the node being transformed; rules ``raise e.fail(...)``."""
        return OpError(f"{self.where}: {why}" if self.where else why)

    def _fresh(self, base: str) -> str:
        g = self.graph
        while True:
            k = g._counters.get(base, 0)
            g._counters[base] = k + 1
            cand = f"{self.prefix}/{base}_{k}"
            if cand not in g.types and all(n.name != cand for n in g.nodes):
                return cand

    # constants ---------------------------------------------------------------
    def const(self, value: Any, like: Tensor, shape: Sequence[int] | None = None) -> Tensor:
        """A parameter of ``like``'s dtype holding ``value`` (broadcast to ``shape``, default rank 0)."""
        shape = () if shape is None else tuple(shape)
        dt = like.dtype
        arr = np.broadcast_to(np.asarray(value, dtype=dt.numpy), shape)
        key = (dt, shape, arr.tobytes()) if arr.size <= 4096 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        t = self.graph.param(self._fresh("const"), np.array(arr), dtype=dt)  # ascontiguousarray makes 0-d 1-d
        if key is not None:
            self._consts[key] = t
        return t

    def zeros(self, like: Tensor) -> Tensor:
        return self.const(0, like, self.static_shape(like))

    def static_shape(self, t: Tensor) -> tuple[int, ...]:
        if not is_static(t.shape):
            raise self.fail(f"value {t.name!r} has symbolic shape {list(t.shape)}; bind the symbols first")
        return tuple(int(d) for d in t.shape)

    # broadcasting ------------------------------------------------------------
    def sum_to(self, t: Tensor, shape: Sequence[int]) -> Tensor:
        """Sum ``t`` over the axes numpy broadcasting added or stretched to reach its shape from ``shape``."""
        shape = tuple(shape)
        have = self.static_shape(t)
        if have == shape:
            return t
        lead = len(have) - len(shape)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and have[lead + i] != 1]
        if axes:
            t = self.sum(t, axes=tuple(axes), keepdims=False)
        if self.static_shape(t) != shape:
            t = self.reshape(t, shape=shape)
        return t

    def broadcast_to(self, t: Tensor, shape: Sequence[int]) -> Tensor:
        """``t`` broadcast (numpy rules) to ``shape``: adding zeros keeps every value exact."""
        shape = tuple(shape)
        if self.static_shape(t) == shape:
            return t
        return self.add(t, self.const(0, t, shape))

    def expand(self, t: Tensor, shape: Sequence[int], axes: Sequence[int]) -> Tensor:
        """A reduction's result (``axes`` reduced away or kept as 1) broadcast back to ``shape``."""
        kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
        if self.static_shape(t) != kept:
            t = self.reshape(t, shape=kept)
        return self.broadcast_to(t, shape)

    # masks -------------------------------------------------------------------
    def greater(self, t: Tensor, c: float) -> Tensor:
        """1 where ``t > c``, else 0, in ``t``'s dtype (zero derivative everywhere)."""
        if c == -math.inf:
            return self.const(1, t, self.static_shape(t))
        if c == math.inf:
            return self.zeros(t)
        # t - c is 0 exactly when t == c (IEEE subtraction), so the mask is exact
        d = t if c == 0 else self.add(t, self.const(-c, t))
        return self.ceil(self.clamp(d, min=0.0, max=1.0))

    def less(self, t: Tensor, c: float) -> Tensor:
        """1 where ``t < c``, else 0."""
        if c == math.inf:
            return self.const(1, t, self.static_shape(t))
        if c == -math.inf:
            return self.zeros(t)
        d = self.neg(t) if c == 0 else self.sub(self.const(c, t), t)
        return self.ceil(self.clamp(d, min=0.0, max=1.0))

    def between(self, t: Tensor, lo: float, hi: float) -> Tensor:
        """1 where ``lo < t < hi``, else 0."""
        if lo == -math.inf:
            return self.less(t, hi)
        if hi == math.inf:
            return self.greater(t, lo)
        return self.mul(self.greater(t, lo), self.less(t, hi))

    def activation_grad(self, ct: Tensor | None, y: Tensor, activation: str) -> Tensor | None:
        """``ct`` through a fused activation, read off its output ``y`` (the clamp's open interval)."""
        if ct is None or activation == "none":
            return ct
        lo, hi = {"relu": (0.0, math.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}[activation]
        return self.mul(ct, self.between(y, lo, hi))

    # pieces ------------------------------------------------------------------
    def interior_pad(self, t: Tensor, axis: int, k: int) -> Tensor:
        """``k - 1`` zeros between neighbours along ``axis``: n elements become (n - 1) * k + 1."""
        if k == 1:
            return t
        shape = self.static_shape(t)
        n = shape[axis]
        if n == 0:
            return t
        u = self.unsqueeze(t, axes=(axis + 1,))
        pads = [0] * (2 * len(shape) + 2)
        pads[2 * (axis + 1) + 1] = k - 1
        u = self.pad(u, pads=tuple(pads))
        flat = self.reshape(u, shape=shape[:axis] + (n * k,) + shape[axis + 1 :])
        end = list(shape)
        end[axis] = (n - 1) * k + 1
        return self.slice(flat, begin=(0,) * len(shape), end=tuple(end))

    def add_maybe(self, a: Tensor | None, b: Tensor | None) -> Tensor | None:
        """a + b where a missing term is zero."""
        if a is None:
            return b
        if b is None:
            return a
        return self.add(a, b)


def check_like(t: Tensor | None, ref: Tensor, what: str) -> None:
    """A rule's result must have its primal's shape and dtype (programming errors in a rule)."""
    if t is None:
        return
    if tuple(t.shape) != tuple(ref.shape) or t.dtype != ref.dtype:
        raise RuntimeError(f"{what}: rule gave {t.dtype}{list(t.shape)}, expected {ref.dtype}{list(ref.shape)}")
