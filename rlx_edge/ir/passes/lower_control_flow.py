"""Lower control flow (``if_``, ``while_``, ``scan``) to straight-line MIR, for targets that run none natively.

Every op of the IR is free of side effects, so computing a branch that is not
taken changes nothing but time:

- ``if_``: both branches are inlined and each output is a ``select_v2`` on the
  condition.
- ``while_``: when the trip count is known at compile time (the condition
  depends only on loop-carried values that are constants, and the body keeps
  them constant), the body is inlined that many times. Otherwise, with a
  ``max_trips`` bound, it is inlined ``max_trips`` times, each trip guarded:
  ``carried = select_v2(active, body(carried), carried)`` and
  ``active = active and cond(carried)``, which computes exactly what the loop
  does. Without either, the node stays (a target that cannot run it refuses
  it at legalization, naming the node).
- ``scan``: inlined once per index of the static axis 0, the slices taken with
  ``slice`` + ``reshape`` and the ys stacked with ``concat``.

Inlined values are named ``<node>/<trip or branch>/<value>``; the node's
outputs keep their names. Nested control flow inside a subgraph is lowered
with it (the inlined nodes are lowered again).
"""

from __future__ import annotations

from collections.abc import Container, Sequence

import numpy as np

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.passes.manager import PassContext, register

CONTROL_OPS = frozenset({"if_", "while_", "scan"})

#: A while_ whose trip count the pass can prove is unrolled only up to this many trips.
MAX_UNROLL = 256


@register("lower_control_flow")
def lower_control_flow(graph: Graph, ctx: PassContext) -> Graph:
    """Replace if_ by both branches and a select, unroll while_ (known or bounded trip count) and scan.

    Option ``keep`` (a collection of op names) leaves those ops as they are:
    the ops a target runs natively.
    """
    keep = frozenset(ctx.options.get("keep", ()))
    if not any(n.op in CONTROL_OPS - keep for n in graph.nodes):
        return graph
    out = graph.empty_like()
    lw = _Lowerer(out, {*graph.types, *(n.name for n in graph.nodes)}, keep, ctx)
    for node in graph.nodes:
        lw.node(node, graph)
    out.output(*graph.outputs)
    return out


class _Lowerer:
    def __init__(self, out: Graph, reserved: set[str], keep: frozenset[str], ctx: PassContext) -> None:
        self.out = out
        self.reserved = reserved
        self.keep = keep
        self.ctx = ctx

    # naming ----------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        out = self.out
        cand, k = base, 1
        while cand in out.types or cand in self.reserved or any(n.name == cand for n in out.nodes):
            cand, k = f"{base}_{k}", k + 1
        self.reserved.add(cand)
        return cand

    # one node of the graph being lowered ------------------------------------------------
    def node(self, node: Node, src: Graph, rename: dict[str, str] | None = None, prefix: str = "") -> list[str]:
        """Add ``node`` of ``src`` (its inputs renamed by ``rename``) to the output; its outputs' new names."""
        rename = rename or {}
        ins = [None if v is None else rename.get(v, v) for v in node.inputs]
        top = not prefix  # a node of the lowered graph itself keeps its names
        name = node.name if top else self.fresh(f"{prefix}{node.name}")
        outs = list(node.outputs) if top else [self.fresh(f"{prefix}{o}") for o in node.outputs]
        if node.op in CONTROL_OPS and node.op not in self.keep:
            start = len(self.out.nodes)
            lowered = getattr(self, f"_{node.op.rstrip('_')}")(node, src, ins, name)
            if lowered is not None:
                self._bind(lowered, outs, [src.types[o] for o in node.outputs], name, self.out.nodes[start:])
                return outs
        quants = [src.types[o].quant for o in node.outputs]
        self.out.add_node(node.op, ins, node.attrs, name=name, out_names=outs, out_quant=quants)
        return outs

    def _bind(self, values: Sequence[str], names: Sequence[str], types: Sequence, where: str, new: list[Node]) -> None:
        """Give ``values`` the names ``names``: rename the output of the node (of ``new``, the nodes the
        lowering added) that computes it, or copy it with a reshape."""
        out = self.out
        renamed: set[str] = set()
        for v, want, t in zip(values, names, types):
            producer = next((n for n in new if v in n.outputs), None)
            if producer is not None and v not in renamed:
                producer.outputs[producer.outputs.index(v)] = want
                out.types[want] = out.types.pop(v)
                for n in new:
                    n.inputs = [want if x == v else x for x in n.inputs]
                renamed.add(v)
                values = [want if x == v else x for x in values]
                continue
            # a value from outside (an input, a constant) or one given twice: a copy, a view on every target
            out.add_node("reshape", [v], {"shape": tuple(int(d) for d in t.shape)}, name=self.fresh(f"{where}/copy"),
                         out_names=[want], out_quant=t.quant)  # fmt: skip

    def inline(self, sub: Graph, args: Sequence[str], prefix: str) -> list[str]:
        """Add ``sub``'s nodes with its inputs bound to ``args``; the names of its outputs."""
        rename = dict(zip(sub.inputs, args))
        for pname, arr in sub.params.items():
            t = sub.types[pname]
            rename[pname] = self.out.param(self.fresh(f"{prefix}{pname}"), arr, t.quant, dtype=t.dtype).name
        for n in sub.nodes:
            rename.update(zip(n.outputs, self.node(n, sub, rename, prefix)))
        return [rename[o] for o in sub.outputs]

    def scalar_flag(self, v: str, where: str) -> str:
        """A bool with one element as a rank-0 bool, which select_v2 broadcasts over any shape."""
        if self.out.types[v].shape == ():
            return v
        return self.out.add_node("reshape", [v], {"shape": ()}, name=self.fresh(f"{where}/flag"))[0].name

    def select(self, flag: str, a: Sequence[str], b: Sequence[str], types: Sequence, where: str) -> list[str]:
        got = []
        for x, y, t in zip(a, b, types):
            if x == y:
                got.append(x)
                continue
            (s,) = self.out.add_node(
                "select_v2", [flag, x, y], {}, name=self.fresh(f"{where}/select"), out_quant=t.quant
            )
            got.append(s.name)
        return got

    # the ops ----------------------------------------------------------------------------
    def _if(self, node: Node, src: Graph, ins: list, name: str) -> list[str]:
        then_, else_ = node.attrs["then_branch"], node.attrs["else_branch"]
        a = self.inline(then_, ins[1:], f"{name}/then/")
        b = self.inline(else_, ins[1:], f"{name}/else/")
        flag = self.scalar_flag(ins[0], name)
        self.ctx.fired(node.name, "if_ lowered to both branches and select_v2")
        return self.select(flag, a, b, [src.types[o] for o in node.outputs], name)

    def _while(self, node: Node, src: Graph, ins: list, name: str) -> list[str] | None:
        cond, body, max_trips = node.attrs["cond"], node.attrs["body"], node.attrs["max_trips"]
        trips = _static_trips(cond, body, [self.out.params.get(v) for v in ins], max_trips)
        values = list(ins)
        if trips is not None:
            for t in range(trips):
                values = self.inline(body, values, f"{name}/{t}/")
            self.ctx.fired(node.name, f"while_ unrolled: {trips} trip(s), known at compile time")
            return values
        if max_trips is None:
            self.ctx.skipped(node.name, "the trip count is not known at compile time and max_trips is not set")
            return None
        types = [src.types[o] for o in node.outputs]
        active = self.scalar_flag(self.inline(cond, values, f"{name}/c0/")[0], name)
        for t in range(max_trips):
            stepped = self.inline(body, values, f"{name}/{t}/")
            values = self.select(active, stepped, values, types, f"{name}/{t}")
            if t + 1 < max_trips:
                more = self.scalar_flag(self.inline(cond, values, f"{name}/c{t + 1}/")[0], f"{name}/{t + 1}")
                active = self.out.add_node(
                    "logical_and", [active, more], {}, name=self.fresh(f"{name}/{t + 1}/active")
                )[0].name
        self.ctx.fired(node.name, f"while_ unrolled to max_trips={max_trips} guarded trips (trip count not known)")
        return values

    def _scan(self, node: Node, src: Graph, ins: list, name: str) -> list[str] | None:
        body, nc = node.attrs["body"], node.attrs["num_carries"]
        carries, xs = list(ins[:nc]), ins[nc:]
        length = int(self.out.types[xs[0]].shape[0])
        if length == 0:
            self.ctx.skipped(node.name, "scan over an empty axis: no step to unroll, its ys are empty")
            return None
        ys: list[list[str]] = [[] for _ in body.outputs[nc:]]
        for t in range(length):
            slices = []
            for x in xs:
                xt = self.out.types[x]
                rank = xt.rank
                begin, end = (t, *(0,) * (rank - 1)), (t + 1, *(int(d) for d in xt.shape[1:]))
                (s,) = self.out.add_node("slice", [x], {"begin": begin, "end": end}, name=self.fresh(f"{name}/{t}/x"))
                shape = tuple(int(d) for d in xt.shape[1:])
                slices.append(
                    self.out.add_node("reshape", [s], {"shape": shape}, name=self.fresh(f"{name}/{t}/xs"))[0].name
                )
            got = self.inline(body, [*carries, *slices], f"{name}/{t}/")
            carries = got[:nc]
            for acc, y in zip(ys, got[nc:]):
                yt = self.out.types[y]
                acc.append(
                    self.out.add_node(
                        "reshape", [y], {"shape": (1, *(int(d) for d in yt.shape))}, name=self.fresh(f"{name}/{t}/y")
                    )[0].name
                )
        stacked = []
        for acc, o in zip(ys, node.outputs[nc:]):
            q = src.types[o].quant
            stacked.append(
                self.out.add_node("concat", acc, {"axis": 0}, name=self.fresh(f"{name}/stack"), out_quant=q)[0].name
            )
        self.ctx.fired(node.name, f"scan unrolled over {length} step(s)")
        return [*carries, *stacked]


def _static_trips(cond: Graph, body: Graph, consts: list[np.ndarray | None], max_trips: int | None) -> int | None:
    """The trip count of a while_ when constants decide it (else None), up to MAX_UNROLL trips."""
    from rlx_edge.ir.interpret import RunPlan

    cond_deps, body_deps = _input_deps(cond), _input_deps(body)
    known = {i: c for i, c in enumerate(consts) if c is not None}
    if not cond_deps[0] <= set(known):
        return None
    test, step = RunPlan(cond), RunPlan(body)

    def feed(g: Graph) -> dict[str, np.ndarray]:
        # inputs the result does not depend on get zeros
        return {
            n: known[i] if i in known else np.zeros(tuple(int(d) for d in g.types[n].shape), g.types[n].dtype.numpy)
            for i, n in enumerate(g.inputs)
        }

    limit = MAX_UNROLL if max_trips is None else min(max_trips, MAX_UNROLL)
    for trips in range(limit + 1):
        if max_trips is not None and trips == max_trips:
            return trips
        if not bool(np.asarray(test(feed(cond))[cond.outputs[0]]).reshape(-1)[0]):
            return trips
        if trips == limit:
            return None
        got = step(feed(body))
        known = {i: got[o] for i, o in enumerate(body.outputs) if body_deps[i] <= set(known)}
        if not cond_deps[0] <= set(known):
            return None
    return None


def _input_deps(g: Graph) -> list[set[int]]:
    """For each output of ``g``, the indices of the graph inputs it depends on."""
    deps: dict[str, set[int]] = {n: {i} for i, n in enumerate(g.inputs)}
    for n in g.nodes:
        d: set[int] = set()
        for v in n.inputs:
            if v is not None:
                d |= deps.get(v, set())
        for o in n.outputs:
            deps[o] = d
    return [deps.get(o, set()) for o in g.outputs]


def lower_for_rules(graph: Graph, rules: Container[str]) -> Graph:
    """``graph`` with the control-flow ops that ``rules`` (a target's rule table) does not run lowered.

    What unrolling leaves constant (a loop counter) is folded and what no output needs removed, so a
    target sees only the loop's real work.
    """
    from rlx_edge.ir.passes.manager import get_pass

    keep = frozenset(op for op in CONTROL_OPS if op in rules)
    if not any(n.op in CONTROL_OPS - keep for n in graph.nodes):
        return graph
    lowered = lower_control_flow(graph, PassContext("lower_control_flow", {"keep": keep}))
    return get_pass("dce")(get_pass("fold")(lowered))
