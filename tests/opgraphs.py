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
