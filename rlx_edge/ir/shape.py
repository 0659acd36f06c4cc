"""Shapes with static and symbolic dimensions.

A dimension is an ``int`` (static) or a ``str`` naming a symbol such as
``"N"``. Symbols travel unchanged through ops that only pass a dimension along
(batch, for example); ops that must compute with a dimension (the spatial size
of a convolution) need it static. :func:`bind` replaces symbols by sizes
before compilation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from rlx_edge.errors import IRError

Dim = int | str
Shape = tuple[Dim, ...]


def as_shape(dims: Iterable[Dim]) -> Shape:
    out: list[Dim] = []
    for d in dims:
        if isinstance(d, str):
            if not d.isidentifier():
                raise IRError(f"symbolic dimension {d!r} must be an identifier such as 'N'")
            out.append(d)
        else:
            try:
                v = int(d)
            except (TypeError, ValueError):
                raise IRError(f"dimension {d!r} is neither an int nor a symbol name") from None
            if v < 0 or v != d:
                raise IRError(f"dimension {d!r} must be a non-negative integer")
            out.append(v)
    return tuple(out)


def is_static(shape: Shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def symbols(shape: Shape) -> set[str]:
    return {d for d in shape if isinstance(d, str)}


def numel(shape: Shape) -> int:
    """Element count of a static shape."""
    if not is_static(shape):
        raise IRError(f"shape {format_shape(shape)} is symbolic; bind its symbols first")
    return math.prod(shape)  # type: ignore[arg-type]


def bind(shape: Shape, env: Mapping[str, int]) -> Shape:
    """Replace symbols that ``env`` names by their sizes."""
    return tuple(env.get(d, d) if isinstance(d, str) else d for d in shape)


def static_dim(d: Dim, what: str) -> int:
    """``d`` as an int, or a clear error saying which dimension must be static."""
    if isinstance(d, str):
        raise IRError(f"{what} is the symbol {d!r} but must be static; bind it first")
    return d


def unify(a: Dim, b: Dim, what: str) -> Dim:
    """Two dimensions that must agree: equal ints, or a symbol meets anything."""
    if a == b:
        return a
    if isinstance(a, str):
        return b
    if isinstance(b, str):
        return a
    raise IRError(f"{what}: {a} != {b}")


def broadcast(a: Shape, b: Shape) -> Shape:
    """Numpy broadcasting, with symbols allowed where the other side is 1 or equal."""
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out: list[Dim] = []
    for x, y in zip(a2, b2):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif isinstance(x, str) or isinstance(y, str):
            out.append(y if isinstance(x, str) else x)
        else:
            raise IRError(f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast")
    return tuple(out)


def along_axis(v, axis: int, rank: int):
    """1-D ``v`` (numpy or jax) reshaped to broadcast along ``axis`` of a rank-``rank`` array: per-channel
    parameters against their tensor."""
    shape = [1] * rank
    shape[axis % rank] = -1
    return v.reshape(shape)


def format_shape(shape: Shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
