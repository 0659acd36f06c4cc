"""quantize, dequantize and requantize for the jax target.

Their semantics (TFLite's float quantize and dequantize formulas, and its
integer Requantize with a Q31 multiplier) are the ops' own ``eval`` in
:mod:`rlx_edge.ir.ops.quant`, run on the node's prepared parameters.
"""

from __future__ import annotations

from rlx_edge.targets.jax._table import RULES, LowerCtx


@RULES.rule("quantize", "dequantize", "requantize")
def _quant(ctx: LowerCtx):
    return ctx.shared_eval()
