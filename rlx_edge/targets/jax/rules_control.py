"""Control flow for the jax target: ``if_`` as ``lax.cond``, ``while_`` as ``lax.while_loop``, ``scan`` as ``lax.scan``.

Each subgraph is lowered once, at lowering time, with the same rule table
(``lower_graph``), so XLA compiles one body, not an unrolled copy per trip. A
quantized subgraph runs its own nodes' integer semantics, as in the reference.
Conditions are bools with one element; they become rank-0 predicates here.
``while_`` with ``max_trips`` carries a trip counter next to the values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.jax._lazy import jnp, lax
from rlx_edge.targets.jax._table import RULES, LowerCtx


def _lowered(ctx: LowerCtx, graph: Graph) -> Callable[..., tuple[Any, ...]]:
    from rlx_edge.targets.jax.lower import lower_graph  # lower.py imports the rule modules' table

    return lower_graph(graph, ctx.options).fn


def _flag(x: Any) -> Any:
    return jnp.reshape(jnp.asarray(x), ())


@RULES.rule("if_")
def _if(ctx: LowerCtx):
    then_fn = _lowered(ctx, ctx.attrs["then_branch"])
    else_fn = _lowered(ctx, ctx.attrs["else_branch"])

    def run(cond: Any, *operands: Any) -> tuple[Any, ...]:
        ops = tuple(jnp.asarray(o) for o in operands)
        return lax.cond(_flag(cond), lambda *a: tuple(then_fn(*a)), lambda *a: tuple(else_fn(*a)), *ops)

    return run


@RULES.rule("while_")
def _while(ctx: LowerCtx):
    cond_fn = _lowered(ctx, ctx.attrs["cond"])
    body_fn = _lowered(ctx, ctx.attrs["body"])
    max_trips = ctx.attrs["max_trips"]

    def run(*carried: Any) -> tuple[Any, ...]:
        values = tuple(jnp.asarray(v) for v in carried)
        if max_trips is None:
            return lax.while_loop(lambda v: _flag(cond_fn(*v)[0]), lambda v: tuple(body_fn(*v)), values)

        def test(state: tuple[Any, tuple[Any, ...]]) -> Any:
            trips, v = state
            return jnp.logical_and(trips < max_trips, _flag(cond_fn(*v)[0]))

        def step(state: tuple[Any, tuple[Any, ...]]) -> tuple[Any, tuple[Any, ...]]:
            trips, v = state
            return trips + 1, tuple(body_fn(*v))

        return lax.while_loop(test, step, (jnp.asarray(0, jnp.int64), values))[1]

    return run


@RULES.rule("scan")
def _scan(ctx: LowerCtx):
    body_fn = _lowered(ctx, ctx.attrs["body"])
    nc = ctx.attrs["num_carries"]

    def run(*inputs: Any) -> tuple[Any, ...]:
        carries = tuple(jnp.asarray(c) for c in inputs[:nc])
        xs = tuple(jnp.asarray(x) for x in inputs[nc:])

        def step(c: tuple[Any, ...], x: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            out = tuple(body_fn(*c, *x))
            return out[:nc], out[nc:]

        final, ys = lax.scan(step, carries, xs)
        return (*final, *ys)

    return run
