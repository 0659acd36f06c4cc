"""The ``demo_clip`` op: y = clip(x, -limit, limit), declared from outside rlx-edge.

Its float reference, integer semantics (``prepare``: the stored values of
+-limit; ``eval``: a clamp, written against the array namespace so the jax
target runs it too), a jax rule and a Cortex-M rule with its own C kernel
(demo_clip_s8.c beside this file). The output keeps the input's quantization
(``passthrough_quant``): clamping stored values needs no rescale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlx_edge.extend import Attr, QContext, cortexm_rule, jax_rule, register_op
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.cortexm.rules import Layer

_HERE = Path(__file__).parent

demo_clip = register_op(
    "demo_clip",
    inputs=("x",),
    attrs={"limit": Attr("float", 1.0, doc="clip to [-limit, limit]")},
    passthrough_quant=True,
    int_dtypes=("i8",),
    doc="clip(x, -limit, limit)",
)


@demo_clip.infer
def _infer(x: TensorType, *, limit: float) -> TensorType:
    return TensorType(x.shape, x.dtype)


@demo_clip.reference
def _reference(x: np.ndarray, *, limit: float) -> np.ndarray:
    return np.clip(x, -limit, limit).astype(x.dtype)


@demo_clip.prepare
def _prepare(ctx: QContext, *, limit: float) -> dict:
    q = ctx.in_types[0].quant
    scale, zp = float(q.scale[0]), int(q.zero_point[0])
    info = np.iinfo(np.int8)
    lo = int(np.clip(np.round(-limit / scale) + zp, info.min, info.max))
    hi = int(np.clip(np.round(limit / scale) + zp, info.min, info.max))
    return {"lo": lo, "hi": hi}


@demo_clip.eval
def _eval(p: Prepared, x, *, limit: float):
    return x.clip(p.lo, p.hi).astype(x.dtype)  # numpy or jax.numpy alike


@demo_clip.sample
def _sample(rng: np.random.Generator):
    return [rng.standard_normal((2, 5)).astype(np.float32)], {"limit": float(rng.uniform(0.2, 2.0))}


@jax_rule("demo_clip")
def _jax(ctx):
    if ctx.quantized:
        return ctx.shared_eval()
    limit = ctx.attrs["limit"]
    return lambda x: x.clip(-limit, limit)


@cortexm_rule(
    "demo_clip",
    sources={name: (_HERE / name).read_text() for name in ("demo_clip_s8.c", "demo_clip_s8.h")},
)
def _cortexm(graph: Graph, node: Node, params: Prepared) -> Layer:
    n = int(np.prod(graph.types[node.inputs[0]].shape))
    fields = {"n": n, "lo": params.lo, "hi": params.hi}
    return Layer("demo_clip_s8", "demo_clip_params", fields, {}, [("in", 0), ("out", 0)])
