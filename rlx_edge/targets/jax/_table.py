"""The JAX target's rule table and the context a rule lowers one node with.

A rule is registered per op (``@RULES.rule("conv2d")``) and called once per
node at lowering time as ``rule(ctx)``. It does all per-model work there, in
numpy (multipliers, shifts, activation ranges, weight sums, exactness
bounds), and returns the traced part: a function of the node's input arrays
(``None`` for absent optional inputs) returning one array or a tuple.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import QContext, get_op
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import TensorType

RULES = RuleTable.for_ops("jax")

# How integer matrix products (conv2d, fully_connected) are computed; all are exact.
#   auto: f32 where the layer's worst-case partial sums stay below 2**24, else i32
#   f32:  float32 products at HIGHEST precision (an error where not provably exact)
#   i32:  int32 operands and accumulators
#   i8:   int8 operands with int32 accumulation and a zero-point correction term
#         (int8 tensor-core friendly; falls back to i32 where operands are not int8)
INT_MATMUL_MODES = ("auto", "f32", "i32", "i8")


@dataclass(frozen=True)
class LowerOptions:
    """Choices that change how, never what, the lowered function computes."""

    int_matmul: str = "auto"

    def __post_init__(self) -> None:
        if self.int_matmul not in INT_MATMUL_MODES:
            raise UnsupportedOpError(
                f"int_matmul={self.int_matmul!r} is not one of {', '.join(map(repr, INT_MATMUL_MODES))}"
            )


@dataclass
class LowerCtx:
    """What a rule knows about the node it lowers."""

    graph: Graph
    node: Node
    in_types: tuple[TensorType | None, ...]
    out_types: tuple[TensorType, ...]
    quantized: bool
    consts: tuple[np.ndarray | None, ...]
    options: LowerOptions = field(default_factory=LowerOptions)
    notes: dict[str, Any] = field(default_factory=dict)  # per-node lowering decisions, for reports and tests
    params: Prepared | None = None  # the node's prepared integer parameters (Program.quant), None when float

    @property
    def attrs(self) -> dict[str, Any]:
        return self.node.attrs

    @property
    def where(self) -> str:
        return f"node {self.node.name!r} ({self.node.op})"

    @property
    def qctx(self) -> QContext:
        return QContext(self.node.name, self.in_types, self.out_types)

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as a numpy constant; integer kernels need weights known at lowering time."""
        c = self.consts[i] if i < len(self.consts) else None
        if c is None:
            raise UnsupportedOpError(
                f"{self.where}: the jax target needs the {what} to be a constant (a graph parameter)"
            )
        return c

    def shared_eval(self) -> Any:
        """The op's own integer ``eval`` on this node's prepared parameters, traced in jax.numpy.

        The same function the numpy reference runs (ARCHITECTURE.md: integer
        numerics written once); nothing about the numerics is decided here.
        """
        opdef = get_op(self.node.op)
        if self.params is None or not opdef.has_int_reference:
            raise self.unsupported(f"quantized {self.node.op} (the op has no integer eval)")
        params, attrs = self.params, self.attrs

        def run(*xs: Any) -> tuple[Any, ...]:
            return opdef.run_eval(params, xs, attrs)

        return run

    def unsupported(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.where}: the jax target does not support {why}")
