"""Prepared integer parameters: what an op's ``prepare`` computes once per node.

TFLite Micro splits every quantized kernel into ``Prepare`` (multipliers,
shifts, zero points, clamps, lookup tables, folded biases, computed once
from the tensors' scales) and ``Eval`` (integer arithmetic with them). An
op declares both (:meth:`OpDef.prepare`, :meth:`OpDef.eval`); planning a
graph stores each node's :class:`Prepared` in ``Program.quant``, ``.rlx``
saves it, and every target reads it from there instead of deriving its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from rlx_edge.errors import IRError

_SCALARS = (bool, int, float, str, type(None))


def _freeze(key: str, v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "iuf" or v.dtype.itemsize > 8:
            raise IRError(f"prepared parameter {key!r}: arrays must be integer or float, not {v.dtype}")
        out = np.ascontiguousarray(v).copy()
        out.flags.writeable = False
        return out
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(key, x) for x in v)
    if isinstance(v, _SCALARS):
        return v
    raise IRError(f"prepared parameter {key!r}: a {type(v).__name__} is not a plain value")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Prepared(Mapping[str, Any]):
    """One node's frozen integer parameters (TFLite Micro's ``OpData``).

    Values are plain: bool, int, float, str, None, tuples of them, or
    read-only integer/float numpy arrays (per-channel multipliers, tables).
    Read them as ``params["mult"]`` or ``params.mult``.
    """

    __slots__ = ("_d",)

    def __init__(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> None:
        d = dict(values or {}, **kw)
        object.__setattr__(self, "_d", {str(k): _freeze(str(k), v) for k, v in d.items()})

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __getattr__(self, key: str) -> Any:
        try:
            return self._d[key]
        except KeyError:
            raise AttributeError(f"prepared parameters have no {key!r} (they have: {', '.join(self._d)})") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("prepared parameters are frozen")

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Prepared):
            return NotImplemented
        return self._d.keys() == other._d.keys() and all(_equal(v, other._d[k]) for k, v in self._d.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        def short(v: Any) -> str:
            if isinstance(v, np.ndarray):
                return f"{v.dtype}{list(v.shape)}"
            return repr(v)

        return "Prepared(" + ", ".join(f"{k}={short(v)}" for k, v in self._d.items()) + ")"

    def replace(self, **kw: Any) -> Prepared:
        return Prepared({**self._d, **kw})


__all__ = ["Prepared"]
