"""Recurrent ops for the jax target: SVDF and LSTM.

Both paths run the op's own code traced in jax.numpy: quantized nodes the integer eval on
their prepared parameters, float nodes the float reference (ir/ops/recurrent.py writes it
against the array namespace). The state is functional there too: an input and an output.
"""

from __future__ import annotations

from rlx_edge.ir.ops import get_op
from rlx_edge.targets.jax._table import RULES, LowerCtx


@RULES.rule("svdf", "lstm")
def _recurrent(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    opdef, attrs = get_op(ctx.node.op), ctx.attrs
    return lambda *xs: opdef.run_reference(xs, attrs)
