"""What a graph is: summary numbers, a per-node table and readable text.

Everything here is arena-free: sizes of the static memory plan belong to
``rlx_edge.ir.plan``. ``summary`` is what ``rlx-edge inspect --json`` prints,
so its keys are part of the command-line contract (ARCHITECTURE.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.shape import format_shape
from rlx_edge.ir.types import QuantParams, TensorType


def summary(graph: Graph) -> dict[str, Any]:
    """JSON-ready overview of ``graph``.

    Returns
    -------
    dict
        ``name``, ``stage``, ``inputs`` / ``outputs`` (lists of ``{name,
        shape, dtype, quant}``; ``quant`` is None or ``{scale, zero_point,
        axis}``, scalars per-tensor and lists per-channel), ``ops`` (op ->
        count, sorted by op), ``nodes`` (count), ``macs`` (None when a count
        depends on a symbolic dimension) and ``param_bytes`` (bytes of the
        param arrays as stored; i4 counts one byte per value).
    """
    macs = [node_macs(graph, n) for n in graph.nodes]
    return {
        "name": graph.name,
        "stage": graph.stage,
        "inputs": [_value(graph, v) for v in graph.inputs],
        "outputs": [_value(graph, v) for v in graph.outputs],
        "ops": dict(sorted(Counter(n.op for n in graph.nodes).items())),
        "nodes": len(graph.nodes),
        "macs": None if any(m is None for m in macs) else sum(macs),  # type: ignore[misc]
        "param_bytes": sum(int(a.nbytes) for a in graph.params.values()),
    }


def node_table(graph: Graph) -> list[dict[str, Any]]:
    """One row per node, in schedule order.

    Each row has ``name``, ``op``, ``inputs`` (type strings such as
    ``"i8[1,8,8,4]"``, None for absent optional inputs), ``outputs`` (type
    strings), ``quant`` (per output: None or ``{scale, zero_point, axis}``),
    ``macs`` and ``param_bytes`` (bytes of the params the node reads).
    """
    rows = []
    for n in graph.nodes:
        outs = [graph.types[o] for o in n.outputs]
        params = {v for v in n.inputs if v is not None and v in graph.params}
        rows.append(
            {
                "name": n.name,
                "op": n.op,
                "inputs": [None if v is None else _type_str(graph.types[v]) for v in n.inputs],
                "outputs": [_type_str(t) for t in outs],
                "quant": [quant_json(t.quant) for t in outs],
                "macs": node_macs(graph, n),
                "param_bytes": sum(int(graph.params[p].nbytes) for p in params),
            }
        )
    return rows


def dump(graph: Graph) -> str:
    """A readable, column-aligned text table of ``graph``, headed by its one-line summary."""
    head = ("node", "op", "inputs", "outputs", "quant", "MACs", "params")
    lines = [head]
    for r in node_table(graph):
        quant = ", ".join("-" if q is None else _quant_short(q) for q in r["quant"])
        lines.append(
            (
                r["name"],
                r["op"],
                ", ".join("-" if s is None else s for s in r["inputs"]),
                ", ".join(r["outputs"]),
                quant,
                "?" if r["macs"] is None else f"{r['macs']:,}",
                _bytes(r["param_bytes"]) if r["param_bytes"] else "-",
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    right = {5, 6}  # numbers align right
    text = []
    for k, row in enumerate(lines):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        text.append("  ".join(cells).rstrip())
        if k == 0:
            text.append("  ".join("-" * w for w in widths))
    for n in graph.nodes:  # control-flow ops: each subgraph's own table, indented under the node's name
        for attr, sub in n.attrs.items():
            if isinstance(sub, Graph):
                text.append(f"{n.name} ({n.op}) {attr}:")
                text.extend("    " + line for line in dump(sub).splitlines())
    return one_line(graph) + "\n" + "\n".join(text)


def one_line(graph: Graph) -> str:
    """E.g. ``"kws: mir, 13 nodes, 2.66 M MACs, 24.4 kB params, in i8[1,49,10,1] -> out i8[1,12]"``."""
    s = summary(graph)
    macs = "?" if s["macs"] is None else _si(s["macs"])
    ins = ", ".join(_type_str(graph.types[v]) for v in graph.inputs) or "nothing"
    outs = ", ".join(_type_str(graph.types[v]) for v in graph.outputs) or "nothing"
    nodes = f"{s['nodes']} node" + ("" if s["nodes"] == 1 else "s")
    return (
        f"{graph.name}: {graph.stage}, {nodes}, {macs} MACs, {_bytes(s['param_bytes'])} params, in {ins} -> out {outs}"
    )


def node_macs(graph: Graph, node: Node) -> int | None:
    """Multiply-accumulates of one node, or None when they depend on a symbolic dimension."""
    ins = [None if v is None else graph.types[v] for v in node.inputs]
    outs = [graph.types[o] for o in node.outputs]
    if any(isinstance(d, str) for t in (*ins, *outs) if t is not None for d in t.shape):
        return None
    try:
        return get_op(node.op).count_macs(ins, outs, node.attrs)
    except RlxError:
        return None


def provenance(graph: Graph) -> list[dict[str, Any]]:
    """Per node, in schedule order: where it came from and what the optimizer did to it.

    Each row has ``node``, ``op``, ``block`` and ``block_op`` (the HIR block it
    was lowered from; None for a node the model gave as MIR), ``rewritten``
    (``{pass, what}`` per rewrite that fired on it: a fusion, a fold, a merge)
    and ``not_rewritten`` (``{pass, why}`` per rewrite a pass recognized but
    did not make, e.g. an activation that could not fuse). Read from
    ``graph.metadata["provenance"]``, which ``lower_hir`` and the pass manager
    write and ``.rlx`` files keep.
    """
    prov = graph.metadata.get("provenance", {})
    rows = []
    for n in graph.nodes:
        entry = prov.get(n.name, {})
        passes = entry.get("passes", [])
        rows.append(
            {
                "node": n.name,
                "op": n.op,
                "block": entry.get("block"),
                "block_op": entry.get("block_op"),
                "rewritten": [{"pass": p["pass"], "what": p["what"]} for p in passes if p["kind"] == "fired"],
                "not_rewritten": [{"pass": p["pass"], "why": p["what"]} for p in passes if p["kind"] == "skipped"],
            }
        )
    return rows


def provenance_text(graph: Graph) -> str:
    """:func:`provenance` as text: one line per node, then ``+`` per rewrite and ``-`` per rewrite not made."""
    lines = [f"provenance of graph {graph.name!r} (+ rewritten by a pass, - left alone, and why):"]
    for r in provenance(graph):
        block = f"from {r['block_op']} block {r['block']!r}" if r["block"] is not None else "given as MIR"
        lines.append(f"  {r['node']} ({r['op']}): {block}")
        lines += [f"    + {p['pass']}: {p['what']}" for p in r["rewritten"]]
        lines += [f"    - {p['pass']}: {p['why']}" for p in r["not_rewritten"]]
    return "\n".join(lines)


def quant_json(q: QuantParams | None) -> dict[str, Any] | None:
    """``{scale, zero_point, axis}``: scalars for per-tensor, lists for per-channel parameters."""
    if q is None:
        return None
    if q.axis is None:
        return {"scale": float(q.scale[0]), "zero_point": int(q.zero_point[0]), "axis": None}
    return {"scale": [float(s) for s in q.scale], "zero_point": [int(z) for z in q.zero_point], "axis": q.axis}


def _value(graph: Graph, name: str) -> dict[str, Any]:
    t = graph.types[name]
    return {"name": name, "shape": list(t.shape), "dtype": t.dtype.value, "quant": quant_json(t.quant)}


def _type_str(t: TensorType) -> str:
    return f"{t.dtype}{format_shape(t.shape)}"


def _quant_short(q: dict[str, Any]) -> str:
    if q["axis"] is None:
        return f"s={q['scale']:.4g} zp={q['zero_point']}"
    return f"per-channel axis {q['axis']} x{len(q['scale'])}"


def _si(n: int) -> str:
    return _scaled(n, ("", " k", " M", " G", " T"))


def _bytes(n: int) -> str:
    return _scaled(n, (" B", " kB", " MB", " GB", " TB"))


def _scaled(n: int, units: tuple[str, ...]) -> str:
    """Three significant digits in decimal (SI) units; exact below 1000."""
    if n < 1000:
        return f"{n}{units[0]}"
    for k, unit in enumerate(units[1:], start=1):
        last = k == len(units) - 1
        text = f"{n / 1000**k:.0f}" if last else f"{n / 1000**k:.3g}"
        if last or float(text) < 1000:
            return f"{text}{unit}"
    raise AssertionError(n)
