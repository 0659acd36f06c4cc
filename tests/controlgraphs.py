"""Small graphs with control flow (if_, while_, scan), float or int8, for the control-flow tests."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams, TensorType

Q = QuantParams(np.float32(0.05), 3, storage="i8")


def act(shape: tuple[int, ...], q: QuantParams | None) -> TensorType:
    return TensorType(shape, "i8" if q is not None else "f32", q)


def values(rng: np.random.Generator, shape: tuple[int, ...], q: QuantParams | None) -> np.ndarray:
    if q is None:
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(-128, 128, shape).astype(np.int8)


def subgraph(name: str, types: list[tuple[str, TensorType]]) -> tuple[Graph, list]:
    g = Graph(name)
    return g, [g.input(n, t.shape, t.dtype, t.quant) for n, t in types]


def counter_loop(
    q: QuantParams | None = Q,
    *,
    shape: tuple[int, ...] = (4,),
    n_input: bool = True,
    n: int = 3,
    max_trips: int | None = None,
    step: np.ndarray | None = None,
) -> Graph:
    """``i = 0; while i < n: x = x + c; i += 1`` (an int8 ADD when quantized); outputs x and i.

    ``n_input``: n is a graph input (the trip count is dynamic), else the constant ``n``.
    """
    c = np.asarray(step if step is not None else np.full(shape, 7 if q is not None else 0.5), "i1" if q else "f4")
    i32 = TensorType((), "i32")
    carried = [("i", i32), ("n", i32), ("x", act(shape, q))]
    cond, (i, nn, _) = subgraph("cond", carried)
    cond.output(cond.less(i, nn, name="more"))
    body, (i, nn, x) = subgraph("body", carried)
    body.output(
        body.add(i, body.param("one", np.asarray(1, np.int32)), name="next_i"),
        nn,
        body.add(x, body.param("c", c, quant=q), out_quant=q, name="next_x"),
    )
    g = Graph("counter_loop")
    x = g.input("x", shape, "i8" if q else "f32", q)
    limit = g.input("n", (), "i32") if n_input else g.param("n", np.asarray(n, np.int32))
    i0 = g.param("i0", np.asarray(0, np.int32))
    outs = g.while_(i0, limit, x, cond=cond, body=body, max_trips=max_trips, name="loop", out_quant=[None, None, q])
    g.output(outs[2], outs[0])
    return g


COUNTER = QuantParams(np.float32(0.5), 0, storage="i8")  # TFLite's int8 LESS needs scales below 1


def int8_counter_loop(max_trips: int | None = None, step: np.ndarray | None = None) -> Graph:
    """The int8-only counter loop (Cortex-M has no int32 arithmetic): ``while i < n: x = x + c; i += 1``
    with i and n int8 (``COUNTER``: a trip adds the stored 1), n a graph input; outputs x."""
    t, xt = TensorType((), "i8", COUNTER), act((4,), Q)
    c = np.asarray(step if step is not None else [7, -40, 127, 1], np.int8)
    carried = [("i", t), ("n", t), ("x", xt)]
    cond, (i, n, _) = subgraph("cond", carried)
    cond.output(cond.less(i, n, name="more"))
    body, (i, n, x) = subgraph("body", carried)
    one = body.param("one", np.asarray(1, np.int8), quant=COUNTER)
    body.output(
        body.add(i, one, out_quant=COUNTER, name="next_i"),
        n,
        body.add(x, body.param("c", c, quant=Q), out_quant=Q, name="next_x"),
    )
    g = Graph("int8_counter_loop")
    x = g.input("x", (4,), "i8", Q)
    limit = g.input("n", (), "i8", COUNTER)
    i0 = g.param("i0", np.asarray(0, np.int8), quant=COUNTER)
    outs = g.while_(
        i0, limit, x, cond=cond, body=body, max_trips=max_trips, name="loop", out_quant=[COUNTER, COUNTER, Q]
    )
    g.output(outs[2])
    return g


def branchy(q: QuantParams | None = Q, shape: tuple[int, ...] = (2, 3)) -> Graph:
    """``(x + y, relu(x)) if cond else (x - y, relu(y))``; inputs cond (bool[1]), x, y."""
    t = act(shape, q)
    then_, (a, b) = subgraph("then", [("a", t), ("b", t)])
    then_.output(then_.add(a, b, out_quant=q), then_.relu(a, out_quant=q))
    else_, (a, b) = subgraph("else", [("a", t), ("b", t)])
    else_.output(else_.sub(a, b, out_quant=q), else_.relu(b, out_quant=q))
    g = Graph("branchy")
    cond = g.input("cond", (1,), "bool")
    x = g.input("x", shape, t.dtype, q)
    y = g.input("y", shape, t.dtype, q)
    outs = g.if_(cond, x, y, then_branch=then_, else_branch=else_, name="branch", out_quant=[q, q])
    g.output(*outs)
    return g


def running_sum(q: QuantParams | None = Q, length: int = 5, shape: tuple[int, ...] = (3,)) -> Graph:
    """``acc = acc + x[t]; y[t] = relu(acc)`` along axis 0; outputs the final acc and the stacked ys."""
    t = act(shape, q)
    body, (acc, x) = subgraph("body", [("acc", t), ("x", t)])
    s = body.add(acc, x, out_quant=q, name="s")
    body.output(s, body.relu(s, out_quant=q, name="y"))
    g = Graph("running_sum")
    acc0 = g.input("acc", shape, t.dtype, q)
    xs = g.input("xs", (length, *shape), t.dtype, q)
    outs = g.scan(acc0, xs, body=body, num_carries=1, name="steps", out_quant=[q, q])
    g.output(*outs)
    return g
