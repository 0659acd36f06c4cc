"""Lower HIR block ops (linear, conv_block, residual, ...) to MIR.

Each block's lowering runs against a scratch graph whose inputs carry the
block's input names; its nodes are then replayed into the new graph. The op
producing a block output takes the block node's output name (and, for the
first such op, the block node's name), so graph inputs, outputs, parameters
and every value outside the blocks keep their names. Intermediate values get
names prefixed with the block's name (``block/conv2d_0``), and every MIR node
records the block it came from in ``graph.metadata["provenance"]``
(``passes/_provenance.py``), which ``rlx-edge inspect --provenance`` shows.
"""

from __future__ import annotations

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph, Node, Tensor
from rlx_edge.ir.ops import OpDef, get_op
from rlx_edge.ir.passes._provenance import record_blocks


def lower_hir(graph: Graph) -> Graph:
    """A new MIR graph where every HIR node of ``graph`` is replaced by its lowering.

    Parameters
    ----------
    graph:
        Any graph; MIR nodes are copied unchanged.

    Returns
    -------
    Graph
        A graph at stage ``"mir"``; ``graph`` itself is not modified.
    """
    out = graph.empty_like("mir")
    reserved = set(graph.types) | {n.name for n in graph.nodes}
    for node in graph.nodes:
        opdef = get_op(node.op)
        if opdef.stage == "hir":
            _lower_node(out, node, opdef, reserved)
        else:
            quants = [graph.types[o].quant for o in node.outputs]
            # control flow: HIR blocks inside its subgraphs lower too (names and types kept, so the
            # subgraph signatures still match)
            attrs = {k: lower_hir(v) if isinstance(v, Graph) and v.stage == "hir" else v for k, v in node.attrs.items()}
            out.add_node(node.op, node.inputs, attrs, name=node.name, out_names=node.outputs, out_quant=quants)
    out.output(*graph.outputs)
    return out


def _lower_node(out: Graph, node: Node, opdef: OpDef, reserved: set[str]) -> None:
    where = f"node {node.name!r} ({node.op})"
    if opdef._lower is None:
        raise IRError(f"{where}: HIR op {node.op} declares no lowering to MIR")
    scratch = Graph(f"{node.name}.lowering", "mir")
    handles: list[Tensor | None] = []
    for v in node.inputs:
        if v is not None and v not in scratch.types:
            t = out.types[v]
            scratch.input(v, t.shape, t.dtype, t.quant)
        handles.append(None if v is None else scratch.tensor(v))
    # like inference and references, lowerings see every declared input (None when absent)
    handles = opdef._pad_inputs(handles)
    results = list(opdef._lower(scratch, handles, dict(node.attrs)))
    if len(results) != len(node.outputs):
        raise IRError(f"{where}: lowering returned {len(results)} values for {len(node.outputs)} outputs")
    if scratch.stage == "hir":  # a block built from other blocks: lower those first
        scratch.output(*results)
        scratch = lower_hir(scratch)
        results = [scratch.tensor(r.name) for r in results]
    final: dict[str, str] = {}
    for r, o in zip(results, node.outputs):
        if scratch.producer(r.name) is None or r.name in final:
            raise IRError(f"{where}: lowering must compute each output with its own op, not return {r.name!r}")
        final[r.name] = o

    def fresh(base: str) -> str:
        cand, k = f"{node.name}/{base}", 1
        while cand in out.types or cand in reserved or any(n.name == cand for n in out.nodes):
            cand, k = f"{node.name}/{base}_{k}", k + 1
        return cand

    rename = {v: v for v in scratch.inputs}
    for pname, arr in scratch.params.items():
        t = scratch.types[pname]
        rename[pname] = out.param(fresh(pname), arr, t.quant, dtype=t.dtype).name
    # The block node's name goes to the op producing the value of that name
    # (the usual single-output case), else to the first op producing an output.
    producing = [sn for sn in scratch.nodes if any(o in final for o in sn.outputs)]
    owner = next((sn for sn in producing if node.name in (final[o] for o in sn.outputs if o in final)), producing[0])
    added: list[str] = []
    for sn in scratch.nodes:
        outs = [final.get(o) or fresh(o) for o in sn.outputs]
        name = node.name if sn is owner else fresh(sn.name)
        out.add_node(
            sn.op,
            [None if v is None else rename[v] for v in sn.inputs],
            sn.attrs,
            name=name,
            out_names=outs,
            out_quant=[scratch.types[o].quant for o in sn.outputs],
        )
        rename.update(zip(sn.outputs, outs))
        added.append(name)
    record_blocks(out, added, node)
