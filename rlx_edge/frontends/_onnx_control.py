"""ONNX control flow (``If``, ``Loop``, ``Scan``) onto the IR's ``if_``, ``while_`` and ``scan``.

ONNX subgraphs read values of the enclosing graphs by name; the IR's subgraphs
are closed. Each free name of a subgraph (its own nested subgraphs included)
becomes either a constant of the subgraph (when it is a constant here, so it
still folds) or an explicit subgraph input fed by the node: an operand of
``if_``, a carried value of ``while_``/``scan`` that the body hands back
unchanged. A subgraph is imported by a nested :class:`Importer` on a model made
of it, so every op, check and message of the importer applies inside it, and a
control-flow node inside a subgraph is imported the same way, recursively.

- ``If`` becomes ``if_``; an ``If`` whose condition is a constant here is
  inlined (the taken branch's nodes are imported into this graph).
- ``Loop(M, cond, v...)`` carries ``(iteration, cond, v..., [M], free...)``
  through a ``while_``. With a constant ``M`` (up to the unroll bound of
  ``lower_control_flow``) the loop gets ``max_trips = M``, so lowering can
  unroll it; a dynamic ``M`` is a carried value the condition compares against,
  and the ``while_`` stays. The body's cond output always ends the loop, also
  without a cond input: onnxruntime and ``onnx.reference`` do so, though the
  spec's text calls it ignored there. A ``Loop`` with a constant ``M`` whose
  condition provably stays true (no or a constant true cond input, and a body
  cond output that folds to true) runs exactly ``M`` trips: it becomes a
  ``scan`` over the iteration numbers, which also takes its scan outputs;
  other loops with scan outputs are refused.
- ``Scan`` (opset 9+) becomes ``scan``; scan axes other than 0 are transposed
  to axis 0 and back; reverse directions are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rlx_edge.errors import RlxError, one_line
from rlx_edge.frontends._onnx_import import ONNX_DTYPES, Importer, Invalid, Unsupported, Value
from rlx_edge.frontends._onnx_ops import CONTRIB_HANDLERS, HANDLERS
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import get_pass
from rlx_edge.ir.passes.lower_control_flow import MAX_UNROLL
from rlx_edge.ir.serialize import MAX_SUBGRAPH_DEPTH
from rlx_edge.ir.types import TensorType

_ONNX_ELEM = {dt: code for code, dt in ONNX_DTYPES.items() if code != onnx.TensorProto.BFLOAT16}
_MESSAGE_CHARS = 300


# free names and subgraph import -------------------------------------------------------------------
def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    out: list[onnx.GraphProto] = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def free_names(g: onnx.GraphProto) -> list[str]:
    """Names ``g`` (or a subgraph nested in it) reads but does not define, in order of first use."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    free: list[str] = []

    def use(name: str) -> None:
        if name and name not in defined and name not in free:
            free.append(name)

    for node in g.node:
        for name in node.input:
            use(name)
        for sub in _subgraphs(node):
            for name in free_names(sub):
                use(name)
        defined.update(o for o in node.output if o)
    for vi in g.output:
        use(vi.name)
    return free


def _outer(imp: Importer, names: Sequence[str], what: str) -> tuple[list[str], dict[str, np.ndarray]]:
    """Split free names into runtime values (passed in explicitly) and constants (copied into the subgraph)."""
    runtime, consts = [], {}
    for name in names:
        v = imp.vals.get(name)
        if v is None:
            if name in imp.poisoned:
                raise Unsupported(f"{what} reads {name!r}, whose node is not supported (see its error)")
            raise Invalid(f"{what} reads {name!r}, which no enclosing graph defines")
        if v.is_const:
            consts[name] = np.asarray(v.const)
        else:
            runtime.append(name)
    return runtime, consts


def _type(imp: Importer, name: str) -> TensorType:
    """The type of outer value ``name`` as ONNX shapes it (what the subgraph sees)."""
    t = imp.g.types[imp.plain(imp.vals[name])]
    if t.quant is not None:
        raise Unsupported(f"the quantized value {name!r} cannot enter a subgraph (float control flow only)")
    return t


def _value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    if t.dtype not in _ONNX_ELEM:
        raise Unsupported(f"value {name!r} of type {t.dtype} is not supported in a subgraph")
    return helper.make_tensor_value_info(name, _ONNX_ELEM[t.dtype], list(t.shape))


def import_subgraph(
    imp: Importer,
    body: onnx.GraphProto,
    inputs: Sequence[tuple[str, TensorType]],
    consts: dict[str, np.ndarray],
    outputs: Sequence[str],
    what: str,
    extra_nodes: Sequence[onnx.NodeProto] = (),
) -> Graph:
    """``body`` as a closed graph of ``inputs`` (these types) with ``consts`` folded in, giving ``outputs``."""
    g = onnx.GraphProto()
    g.CopyFrom(body)
    del g.input[:]
    g.input.extend(_value_info(n, t) for n, t in inputs)
    g.initializer.extend(numpy_helper.from_array(arr, n) for n, arr in consts.items())
    g.node.extend(extra_nodes)
    del g.output[:]
    g.output.extend(helper.make_empty_tensor_value_info(o) for o in outputs)
    model = helper.make_model(g, opset_imports=list(imp.model.opset_import))
    model.ir_version = imp.model.ir_version or onnx.IR_VERSION
    sub = Importer(model, imp.path)
    sub.depth = imp.depth + 1
    if sub.depth > MAX_SUBGRAPH_DEPTH:
        raise Unsupported(f"{what}: subgraphs nested deeper than {MAX_SUBGRAPH_DEPTH} are not supported")
    try:
        return sub.run()
    except RlxError as e:
        why = "; ".join(sub.problems) if sub.problems else one_line(str(e).removeprefix(f"{imp.path}: "), 300)
        raise Unsupported(f"{what}: {one_line(why, _MESSAGE_CHARS)}") from None


def _emit(
    imp: Importer, node: onnx.NodeProto, op: str, inputs: list[str], attrs: dict[str, Any], names: Sequence[str]
) -> list[str]:
    """Add one node whose outputs take the ONNX output names ``names`` ("" for one the file does not name)."""
    name = imp.unique(node.name or node.output[0] or op)
    outs = []
    for i, want in enumerate(names):
        outs.append(imp.unique(want or f"{name}:{i}"))
        imp.reserved.add(outs[-1])
    got = imp.g.add_node(op, inputs, attrs, name=name, out_names=outs)
    return [o.name for o in got]


def _flag(v: Value, what: str) -> bool:
    arr = np.asarray(v.const)
    if arr.size != 1:
        raise Invalid(f"{what} must have one element, got shape {list(arr.shape)}")
    return bool(arr.reshape(-1)[0])


def _declared_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    """A scalar subgraph input (iteration number, condition) as declared: rank 0 unless it says [1]."""
    t = vi.type.tensor_type
    return (1,) if t.HasField("shape") and len(t.shape.dim) == 1 else ()


# If -------------------------------------------------------------------------------------------------
@HANDLERS.rule("If")
def _if(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    cond = imp.val(node, 0)
    if cond is None:
        raise Invalid("has no condition")
    then_g, else_g = a["then_branch"], a["else_branch"]
    for name, b in (("then_branch", then_g), ("else_branch", else_g)):
        if len(b.output) != len(node.output):
            raise Invalid(f"{name} has {len(b.output)} outputs but the node has {len(node.output)}")
    if cond.is_const:
        _inline(imp, node, then_g if _flag(cond, "the condition") else else_g)
        return
    free = free_names(then_g)
    free += [n for n in free_names(else_g) if n not in free]
    runtime, consts = _outer(imp, free, "a branch")
    operands = [(n, _type(imp, n)) for n in runtime]
    branches = {
        name: import_subgraph(imp, b, operands, consts, [vi.name for vi in b.output], name)
        for name, b in (("then_branch", then_g), ("else_branch", else_g))
    }
    for i, (t, e) in enumerate(zip(*(bg.outputs for bg in branches.values()))):
        tt, et = branches["then_branch"].types[t], branches["else_branch"].types[e]
        if tt != et:
            raise Unsupported(
                f"output {i} is {tt.dtype}{list(tt.shape)} in then_branch but {et.dtype}{list(et.shape)} in"
                " else_branch; branches of different types are not supported"
            )
    ins = [imp.plain(cond), *(imp.plain(imp.vals[n]) for n in runtime)]
    for i, out in enumerate(_emit(imp, node, "if_", ins, branches, node.output)):
        imp.set_out(node, i, out)


def _inline(imp: Importer, node: onnx.NodeProto, branch: onnx.GraphProto) -> None:
    """Import the taken branch's nodes into this graph (its outer names are in scope here)."""
    defined = [t.name for t in branch.initializer] + [o for n in branch.node for o in n.output if o]
    clash = next((d for d in defined if d in imp.vals), None)
    if clash is not None:
        raise Invalid(f"the branch redefines {clash!r}, a value of the enclosing graph")
    for init in branch.initializer:
        imp.vals[init.name] = Value(const=imp._to_array(init), src=init.name)
    imp.reserved.update(defined)
    outer = imp.node
    try:
        for n in branch.node:
            imp.node = n
            imp._import_node(n, HANDLERS, CONTRIB_HANDLERS)
    finally:
        imp.node = outer
    for i, vi in enumerate(branch.output):
        if vi.name in imp.poisoned:
            imp.poisoned.update(o for o in node.output if o)
        elif vi.name not in imp.vals:
            raise Invalid(f"branch output {vi.name!r} is not computed")
        elif node.output[i]:
            imp.vals[node.output[i]] = imp.vals[vi.name]


# Loop -----------------------------------------------------------------------------------------------
@HANDLERS.rule("Loop")
def _loop(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    body: onnx.GraphProto = a["body"]
    m, c = imp.val(node, 0), imp.val(node, 1)
    init = [imp.val(node, i) for i in range(2, len(node.input))]
    if any(v is None for v in init):
        raise Invalid("leaves a loop-carried initial value empty")
    n = len(init)
    if len(body.input) != 2 + n:
        raise Invalid(f"body has {len(body.input)} inputs but must have {2 + n} (iteration, cond, {n} carried)")
    n_scan = len(body.output) - 1 - n
    if n_scan < 0 or len(node.output) != n + n_scan:
        raise Invalid(f"body has {len(body.output)} outputs; with {n} carried values the node has {len(node.output)}")
    if m is None and c is None:
        raise Unsupported("a Loop with neither a trip count M nor a condition never ends and is not supported")
    trips = None
    if m is not None and m.is_const:
        trips = max(int(np.asarray(m.const).reshape(-1)[0]), 0) if np.asarray(m.const).size == 1 else None
        if trips is None:
            raise Invalid("the trip count M must have one element")
    runtime, consts = _outer(imp, free_names(body), "the body")
    carried_names = [vi.name for vi in body.input[2:]]
    outs_v = [vi.name for vi in body.output[1 : 1 + n]]
    scan_outs = [vi.name for vi in body.output[1 + n :]]
    it_in, cond_in = body.input[0], body.input[1]
    it_shape, cond_shape = _declared_shape(it_in), _declared_shape(cond_in)
    init_names = [imp.plain(v) for v in init]  # type: ignore[arg-type]
    v_types = [imp.g.types[x] for x in init_names]
    free_types = [(f, _type(imp, f)) for f in runtime]
    if any(t.quant is not None for t in v_types):
        raise Unsupported("quantized loop-carried values are not supported (float control flow only)")
    runs_m_trips = trips is not None and (c is None or (c.is_const and _flag(c, "the condition")))
    if runs_m_trips and _loop_as_scan(imp, node, body, trips, it_shape, consts, runtime, free_types, init_names):
        return
    if n_scan:
        raise Unsupported(
            f"scan outputs ({', '.join(scan_outs)}) are supported only with a constant trip count M and a"
            " condition that stays true (their length must be known); use a Scan or carry them instead"
        )
    i64 = TensorType(it_shape, "i64")
    flag = TensorType(cond_shape, "bool")
    dynamic_m = m is not None and trips is None
    bounded = trips is not None and trips <= MAX_UNROLL
    taken = _body_names(body) | set(imp.vals)
    m_name, next_it, one = (_fresh(taken, b) for b in ("M", f"{it_in.name}__next", f"{it_in.name}__one"))
    inc = helper.make_node("Add", [it_in.name, one], [next_it], name=next_it)
    consts = {**consts, one: np.ones(it_shape, np.int64)}
    carried = [(it_in.name, i64), (cond_in.name, flag), *zip(carried_names, v_types)]
    if dynamic_m:
        carried.append((m_name, _type(imp, node.input[0])))
    carried += free_types
    body_outs = [next_it, body.output[0].name, *outs_v]
    body_outs += [m_name] if dynamic_m else []
    body_g = import_subgraph(imp, body, carried, consts, [*body_outs, *runtime], "body", [inc])
    _check_carried(body_g, carried)
    cond_g = Graph(f"{node.name or node.output[0]}_cond")
    handles = {name: cond_g.input(name, t.shape, t.dtype) for name, t in carried}
    test = handles[cond_in.name]
    if m is not None and not bounded:
        limit = handles[m_name] if dynamic_m else cond_g.param("M", np.asarray(trips, np.int64))
        more = cond_g.less(handles[it_in.name], limit, name="more")
        test = cond_g.logical_and(test, more, name="go")
    cond_g.output(test)
    ins = [
        imp.param(np.zeros(it_shape, np.int64), base=f"{node.output[0]}__iter0"),
        imp.plain(c) if c is not None else imp.param(np.ones(cond_shape, bool), base=f"{node.output[0]}__cond0"),
        *init_names,
        *([imp.plain(m)] if dynamic_m else []),  # type: ignore[arg-type]
        *(imp.plain(imp.vals[f]) for f in runtime),
    ]
    attrs = {"cond": cond_g, "body": body_g, "max_trips": trips if bounded else None}
    outs = _emit(imp, node, "while_", ins, attrs, ["", "", *node.output[:n]] + [""] * (len(carried) - 2 - n))
    for i in range(n):
        imp.set_out(node, i, outs[2 + i])


def _loop_as_scan(
    imp: Importer,
    node: onnx.NodeProto,
    body: onnx.GraphProto,
    trips: int,
    it_shape: tuple[int, ...],
    consts: dict[str, np.ndarray],
    runtime: list[str],
    free_types: list[tuple[str, TensorType]],
    init_names: list[str],
) -> bool:
    """``for i in range(M)``: a scan over the iteration numbers, which stacks the scan outputs too.

    Only when the body's condition output is true whenever its condition input is (a constant once
    that input is): onnxruntime and onnx.reference stop on it even without a cond input. Else False.
    """
    n = len(init_names)
    carried = [*zip((vi.name for vi in body.input[2:]), (imp.g.types[x] for x in init_names)), *free_types]
    inputs = [*carried, (body.input[0].name, TensorType(it_shape, "i64"))]
    outs = [vi.name for vi in body.output[: 1 + n]] + runtime + [vi.name for vi in body.output[1 + n :]]
    consts = {**consts, body.input[1].name: np.ones(_declared_shape(body.input[1]), bool)}
    body_g = import_subgraph(imp, body, inputs, consts, outs, "body")
    flag = body_g.params.get(body_g.outputs[0])
    if flag is None or not np.all(flag):
        return False
    body_g.outputs.pop(0)
    body_g = get_pass("dce")(body_g)
    _check_carried(body_g, carried)
    iters = imp.param(np.arange(trips, dtype=np.int64).reshape(trips, *it_shape), base=f"{node.output[0]}__iters")
    ins = [*init_names, *(imp.plain(imp.vals[f]) for f in runtime), iters]
    attrs = {"body": body_g, "num_carries": len(carried)}
    names = [*node.output[:n], *[""] * len(runtime), *node.output[n:]]
    got = _emit(imp, node, "scan", ins, attrs, names)
    for i in range(n):
        imp.set_out(node, i, got[i])
    for k, y in enumerate(got[len(carried) :]):
        imp.set_out(node, n + k, y)
    return True


def _body_names(g: onnx.GraphProto) -> set[str]:
    names = {vi.name for vi in (*g.input, *g.output)} | {t.name for t in g.initializer}
    for nd in g.node:
        names.update(nd.output)
        for sub in _subgraphs(nd):
            names |= _body_names(sub)
    return names


def _fresh(taken: set[str], base: str) -> str:
    """A name for a value the importer adds to a body, clashing with none the file uses; taken from then on."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _check_carried(body: Graph, carried: Sequence[tuple[str, TensorType]]) -> None:
    for (name, t), out in zip(carried, body.outputs):
        got = body.types[out]
        if got != t:
            raise Unsupported(
                f"loop-carried value {name!r} is {t.dtype}{list(t.shape)} on entry but the body gives"
                f" {got.dtype}{list(got.shape)}; only carried values that keep their shape and type are supported"
            )


# Scan -----------------------------------------------------------------------------------------------
@HANDLERS.rule("Scan")
def _scan(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    if imp.opset < 9:
        raise Unsupported("Scan of opset 8 (batch axis, sequence_lens) is not supported; export with opset 9 or later")
    body: onnx.GraphProto = a["body"]
    k = int(a["num_scan_inputs"])
    ins = [imp.val(node, i) for i in range(len(node.input))]
    if any(v is None for v in ins) or not 0 < k <= len(ins):
        raise Invalid(f"num_scan_inputs={k} does not fit its {len(ins)} inputs (none may be empty)")
    n = len(ins) - k
    if len(body.input) != n + k or len(body.output) < n or len(node.output) != len(body.output):
        raise Invalid("body inputs/outputs do not match the node's states and scan inputs/outputs")
    for attr in ("scan_input_directions", "scan_output_directions"):
        if any(int(d) != 0 for d in a.get(attr, [])):
            raise Unsupported(f"{attr}: reverse scanning is not supported; reverse the sequence outside the Scan")
    in_axes = [int(x) for x in a.get("scan_input_axes", [0] * k)]
    out_axes = [int(x) for x in a.get("scan_output_axes", [0] * (len(body.output) - n))]
    states = [imp.plain(v) for v in ins[:n]]  # type: ignore[arg-type]
    xs = []
    for v, axis in zip(ins[n:], in_axes):
        name = imp.plain(v)  # type: ignore[arg-type]
        r = imp.g.types[name].rank
        if not -r <= axis < r:
            raise Invalid(f"scan_input_axes {axis} is out of range for rank {r}")
        axis %= r
        xs.append(imp.transpose(name, (axis, *(d for d in range(r) if d != axis))) if axis else name)
    runtime, consts = _outer(imp, free_names(body), "the body")
    state_types = [imp.g.types[s] for s in states]
    slices = [TensorType(imp.g.types[x].shape[1:], imp.g.types[x].dtype) for x in xs]
    if any(imp.g.types[x].quant is not None for x in [*states, *xs]):
        raise Unsupported("quantized scan values are not supported (float control flow only)")
    carried = [*zip((vi.name for vi in body.input[:n]), state_types), *((f, _type(imp, f)) for f in runtime)]
    inputs = [*carried, *zip((vi.name for vi in body.input[n:]), slices)]
    outs = [vi.name for vi in body.output[:n]] + runtime + [vi.name for vi in body.output[n:]]
    body_g = import_subgraph(imp, body, inputs, consts, outs, "body")
    _check_carried(body_g, carried)
    ins_ = [*states, *(imp.plain(imp.vals[f]) for f in runtime), *xs]
    # a ys transposed back to its axis leaves the ONNX name to the transpose
    ys_names = [o if not axis else "" for o, axis in zip(node.output[n:], out_axes)]
    names = [*node.output[:n], *[""] * len(runtime), *ys_names]
    got = _emit(imp, node, "scan", ins_, {"body": body_g, "num_carries": len(carried)}, names)
    for i in range(n):
        imp.set_out(node, i, got[i])
    for j, (y, axis) in enumerate(zip(got[len(carried) :], out_axes)):
        r = imp.g.types[y].rank
        if not -r <= axis < r:
            raise Invalid(f"scan_output_axes {axis} is out of range for rank {r}")
        axis %= r
        perm = list(range(1, r))
        perm.insert(axis, 0)
        imp.set_out(node, n + j, imp.transpose(y, perm) if axis else y)
