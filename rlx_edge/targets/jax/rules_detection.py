"""SSD post-processing for the jax target: the op's own float reference, called back on the host.

Non-maximum suppression selects a data-dependent number of boxes through a stable sort and
a greedy loop; the reference (``ir/ops/detection.py``) already follows TFLite Micro bit for bit,
so the jitted function calls it with ``jax.pure_callback`` (outputs of static shape, one sample
at a time under ``vmap``) instead of restating it in ``lax``. It runs on the host CPU, as
TFLite's own post-processing does beside an accelerator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir.ops import get_op
from rlx_edge.targets.jax._lazy import require_jax
from rlx_edge.targets.jax._table import RULES, LowerCtx


@RULES.rule("detection_postprocess")
def _detection_postprocess(ctx: LowerCtx):
    jax = require_jax()
    opdef, attrs, qctx = get_op(ctx.node.op), ctx.attrs, ctx.qctx
    shapes = tuple(jax.ShapeDtypeStruct(tuple(int(d) for d in t.shape), t.dtype.numpy) for t in ctx.out_types)

    def host(*xs: Any) -> tuple[np.ndarray, ...]:
        outs = opdef.run_typed_reference(qctx, [np.asarray(x) for x in xs], attrs)
        return tuple(np.asarray(o, s.dtype).reshape(s.shape) for o, s in zip(outs, shapes))

    return lambda *xs: jax.pure_callback(host, shapes, *xs, vmap_method="sequential")
