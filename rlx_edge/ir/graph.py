"""Graphs of ops: named inputs, parameters, nodes in topological order, outputs.

Values are referred to by name. A value is a graph input, a parameter (a numpy
constant) or an output of exactly one node. Nodes keep a stable integer id
that is never reused, and a unique name.

Build graphs with the op builder methods, which infer types::

    g = Graph("tiny")
    x = g.input("x", (1, 8, 8, 1), "f32")
    w = g.param("w", np.ones((4, 3, 3, 1), np.float32))
    y = g.conv2d(x, w, strides=(1, 1), padding="same", activation="relu")
    g.output(y)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.dtype import DType, as_dtype, from_numpy
from rlx_edge.ir.ops import REGISTRY, OpDef, get_op
from rlx_edge.ir.shape import Shape
from rlx_edge.ir.types import QuantParams, TensorType

STAGES = ("hir", "mir", "lir")


@dataclass
class Node:
    """One op application. ``inputs`` may contain ``None`` for absent optional inputs."""

    id: int
    name: str
    op: str
    inputs: list[str | None]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def opdef(self) -> OpDef:
        return get_op(self.op)

    def __str__(self) -> str:
        return f"{self.name} ({self.op})"


@dataclass(frozen=True)
class Tensor:
    """A handle to a value of a graph, returned by builder methods."""

    graph: Graph
    name: str

    @property
    def type(self) -> TensorType:
        return self.graph.types[self.name]

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}: {self.type})"


class Graph:
    """A tensor DAG at one IR stage (``hir``, ``mir`` or ``lir``)."""

    def __init__(self, name: str = "model", stage: str = "mir") -> None:
        if stage not in STAGES:
            raise IRError(f"unknown stage {stage!r}; use one of {', '.join(STAGES)}")
        self.name = name
        self.stage = stage
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.params: dict[str, np.ndarray] = {}
        self.types: dict[str, TensorType] = {}
        self.nodes: list[Node] = []
        self.metadata: dict[str, Any] = {}
        self._next_id = 0
        self._counters: dict[str, int] = {}

    # construction -----------------------------------------------------
    def input(self, name: str, shape: Sequence, dtype: DType | str = "f32", quant: QuantParams | None = None) -> Tensor:
        self._claim(name)
        self.types[name] = TensorType(tuple(shape), as_dtype(dtype), quant)
        self.inputs.append(name)
        return Tensor(self, name)

    def param(
        self, name: str, value: np.ndarray, quant: QuantParams | None = None, dtype: DType | str | None = None
    ) -> Tensor:
        """Add a constant. ``dtype`` overrides the one read off the array (bf16, i4)."""
        self._claim(name)
        arr = np.array(value, copy=True)
        dt = as_dtype(dtype) if dtype is not None else from_numpy(arr.dtype)
        # not ascontiguousarray: it returns at least 1-d, and a rank-0 constant must stay rank 0
        arr = np.array(arr.astype(dt.numpy, copy=False), order="C")
        arr.flags.writeable = False
        self.params[name] = arr
        self.types[name] = TensorType(arr.shape, dt, quant)
        return Tensor(self, name)

    def output(self, *values: Tensor | str) -> None:
        for v in values:
            name = v.name if isinstance(v, Tensor) else v
            if name not in self.types:
                raise IRError(f"graph output {name!r} is not a value of graph {self.name!r}")
            self.outputs.append(name)

    def add_node(
        self,
        op: str,
        inputs: Sequence[Tensor | str | None],
        attrs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        out_quant: QuantParams | Sequence[QuantParams | None] | None = None,
        out_names: Sequence[str] | None = None,
    ) -> list[Tensor]:
        """Append a node, inferring and recording its output types."""
        opdef = get_op(op)
        # an HIR subgraph (a while_ body of linear blocks) makes its graph HIR too: lower_hir lowers both
        hir_sub = any(isinstance(v, Graph) and v.stage == "hir" for v in (attrs or {}).values())
        if (opdef.stage == "hir" or hir_sub) and self.stage != "hir":
            self.stage = "hir"
        in_names = [None if v is None else (v.name if isinstance(v, Tensor) else v) for v in inputs]
        while in_names and in_names[-1] is None and not opdef.variadic:
            in_names.pop()
        name = name or self._fresh(op)
        where = f"node {name!r} ({op})"
        for i, v in enumerate(in_names):
            if v is not None and v not in self.types:
                raise IRError(f"{where}: input {i} refers to unknown value {v!r}")
        opdef.check_arity(len(in_names), where)
        norm = opdef.normalize_attrs(dict(attrs or {}), where)
        in_types = [None if v is None else self.types[v] for v in in_names]
        out_types = infer_node(opdef, in_types, norm, where)
        n_out = len(out_types)
        if out_names is None:
            out_names = [name] if n_out == 1 else [f"{name}:{i}" for i in range(n_out)]
        if len(out_names) != n_out:
            raise IRError(f"{where}: {n_out} outputs but {len(out_names)} names given")
        quants = _as_quant_list(out_quant, n_out, where)
        self._claim(name, node=True)
        for o in out_names:
            if o != name:
                self._claim(o)
        for o, t, q in zip(out_names, out_types, quants):
            if q is not None:
                t = TensorType(t.shape, q.storage if t.dtype.is_float else t.dtype, q)
            self.types[o] = t
        node = Node(self._next_id, name, op, in_names, list(out_names), norm)
        self._next_id += 1
        self.nodes.append(node)
        return [Tensor(self, o) for o in out_names]

    def __getattr__(self, op: str) -> Any:
        # Builder methods for every registered op: g.conv2d(x, w, b, strides=...).
        if op.startswith("_") or op not in REGISTRY:
            raise AttributeError(op)

        def build(*inputs: Tensor | str | None, name: str | None = None, out_quant: Any = None, **attrs: Any):
            outs = self.add_node(op, inputs, attrs, name=name, out_quant=out_quant)
            return outs[0] if len(outs) == 1 else tuple(outs)

        build.__name__ = op
        build.__doc__ = REGISTRY[op].doc
        return build

    # queries ----------------------------------------------------------
    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise IRError(f"graph {self.name!r} has no node {name!r}")

    def producer(self, value: str) -> Node | None:
        for n in self.nodes:
            if value in n.outputs:
                return n
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]

    def values(self) -> Iterator[str]:
        return iter(self.types)

    def tensor(self, name: str) -> Tensor:
        if name not in self.types:
            raise IRError(f"graph {self.name!r} has no value {name!r}")
        return Tensor(self, name)

    def copy(self) -> Graph:
        g = Graph(self.name, self.stage)
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        g.params = dict(self.params)  # arrays are read-only, sharing is safe
        g.types = dict(self.types)
        g.nodes = [Node(n.id, n.name, n.op, list(n.inputs), list(n.outputs), _copy_attrs(n.attrs)) for n in self.nodes]
        g.metadata = dict(self.metadata)
        g._next_id = self._next_id
        g._counters = dict(self._counters)
        return g

    def empty_like(self, stage: str | None = None) -> Graph:
        """A graph with this one's name, metadata, inputs and parameters, and no nodes or outputs yet:
        where a rewriting pass starts re-emitting the nodes."""
        out = Graph(self.name, self.stage if stage is None else stage)
        out.metadata = dict(self.metadata)
        for name in self.inputs:
            t = self.types[name]
            out.input(name, t.shape, t.dtype, t.quant)
        for name, arr in self.params.items():
            t = self.types[name]
            out.param(name, arr, t.quant, dtype=t.dtype)
        return out

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, stage={self.stage}, {len(self.nodes)} nodes)"

    # naming -----------------------------------------------------------
    def _claim(self, name: str, node: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise IRError(f"value names must be non-empty strings, not {name!r}")
        if name in self.types or (node and any(n.name == name for n in self.nodes)):
            raise IRError(f"graph {self.name!r} already has a value named {name!r}")

    def _fresh(self, op: str) -> str:
        while True:
            k = self._counters.get(op, 0)
            self._counters[op] = k + 1
            cand = f"{op}_{k}"
            if cand not in self.types and all(n.name != cand for n in self.nodes):
                return cand


def _copy_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    # subgraphs (control-flow ops) are copied too, so that editing a copy's subgraph leaves the original alone
    return {k: v.copy() if isinstance(v, Graph) else v for k, v in attrs.items()}


def infer_node(opdef: OpDef, in_types: Sequence[TensorType | None], attrs: dict[str, Any], where: str):
    """Run an op's type inference, naming the node in any error."""
    try:
        return opdef.run_infer(in_types, attrs)
    except IRError as e:
        msg = str(e)
        raise OpError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def _as_quant_list(q: Any, n: int, where: str) -> list[QuantParams | None]:
    if q is None or isinstance(q, QuantParams):
        return [q] * (1 if n == 1 else n) if n == 1 or q is None else _fail(where)
    q = list(q)
    if len(q) != n:
        raise IRError(f"{where}: out_quant has {len(q)} entries for {n} outputs")
    return q


def _fail(where: str):
    raise IRError(f"{where}: a multi-output op needs one out_quant entry per output")
