"""Comparisons, logical ops and selection for the jax target (one table row per op).

Float and plain integer operands are compared in the type the reference
promotes them to; quantized comparisons run the op's own integer ``eval``
(TFLite Micro's rescaled comparison) on the prepared parameters.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from rlx_edge.ir.ops import elementwise_dtype
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx

_COMPARE: dict[str, Callable] = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "less": operator.lt,
    "less_equal": operator.le,
}


def _compare_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        if ctx.quantized:
            return ctx.shared_eval()
        dt = elementwise_dtype(*ctx.in_types).numpy
        fn = _COMPARE[name]
        return lambda a, b: fn(a.astype(dt), b.astype(dt))


for _name in _COMPARE:
    _compare_rule(_name)


_LOGICAL: dict[str, Callable] = {
    "logical_and": lambda a, b: jnp.logical_and(a, b),
    "logical_or": lambda a, b: jnp.logical_or(a, b),
    "logical_not": lambda x: jnp.logical_not(x),
}


def _logical_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        return _LOGICAL[name]


for _name in _LOGICAL:
    _logical_rule(_name)


@RULES.rule("select_v2")
def _select_v2(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    dt = elementwise_dtype(*ctx.in_types[1:]).numpy
    return lambda c, x, y: jnp.where(c, x.astype(dt), y.astype(dt))
