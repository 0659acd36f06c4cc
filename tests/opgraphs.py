"""One-node graphs for op tests: the node under test fed by graph inputs or constants."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.graph import Graph


def single_node_graph(op: str, inputs: list, attrs: dict, out_quant=None, in_quant=None, constants=()) -> Graph:
    """One ``op`` node fed by graph inputs, or by parameters at the input positions in ``constants``."""
    g = Graph(f"{op}_under_test")
    in_quant = in_quant or [None] * len(inputs)
    names: list[str | None] = []
    for i, (a, q) in enumerate(zip(inputs, in_quant)):
        if a is None:
            names.append(None)
        elif i in constants:
            names.append(g.param(f"p{i}", a, quant=q).name)
        else:
            a = np.asarray(a)
            names.append(g.input(f"x{i}", a.shape, from_numpy(a.dtype), quant=q).name)
    g.output(*g.add_node(op, names, attrs, out_quant=out_quant))
    return g


def merge_graphs(graphs: list[Graph], name: str, prefix: str) -> Graph:
    """Disjoint branches of one graph: graph ``i``'s names prefixed ``{prefix}{i}_``."""
    m = Graph(name)
    for i, g in enumerate(graphs):
        ren = {v: f"{prefix}{i}_{v}" for v in g.types}
        for v in g.inputs:
            t = g.types[v]
            m.input(ren[v], t.shape, t.dtype, t.quant)
        for v, a in g.params.items():
            t = g.types[v]
            m.param(ren[v], a, t.quant, t.dtype)
        for n in g.nodes:
            m.add_node(
                n.op,
                [None if v is None else ren[v] for v in n.inputs],
                n.attrs,
                name=f"{prefix}{i}_{n.name}",
                out_quant=[g.types[o].quant for o in n.outputs],
                out_names=[ren[o] for o in n.outputs],
            )
        m.output(*[ren[o] for o in g.outputs])
    return m
