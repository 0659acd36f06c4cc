"""quantize, dequantize, requantize and fake_quant for the jax target.

Their semantics (TFLite's float quantize and dequantize formulas, and its
integer Requantize with a Q31 multiplier) are the ops' own ``eval`` in
:mod:`rlx_edge.ir.ops.quant`, run on the node's prepared parameters.
fake_quant (and its straight-through gradient) is float: its reference is
written against the array namespace, so the same code traces here.
"""

from __future__ import annotations

from rlx_edge.ir.ops import get_op
from rlx_edge.targets.jax._table import RULES, LowerCtx


@RULES.rule("quantize", "dequantize", "requantize")
def _quant(ctx: LowerCtx):
    return ctx.shared_eval()


@RULES.rule("fake_quant")
def _fake_quant(ctx: LowerCtx):
    opdef, attrs = get_op(ctx.node.op), ctx.attrs

    def run(*xs):
        return opdef.run_reference(xs, attrs)

    return run
