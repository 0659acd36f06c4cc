"""HIR block ops for building models in Python; each lowers to MIR ops.

A block declares its type inference and a float reference like any op, plus a
lowering ``lower(g, inputs, attrs) -> [Tensor]`` (``inputs``: every declared
input as a Tensor of ``g``, None when absent) that emits MIR ops into the
graph ``g`` with its builder methods (see ``rlx_edge.ir.passes.lower_hir``).
Inference, references and MAC counts are composed from the MIR ops the block
lowers to, so a block never restates their rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    ACTIVATIONS,
    FLOAT_SAMPLE_DTYPES,
    PADDING,
    PADS,
    apply_activation,
    compute_dtype,
    fail,
    finish,
    need_rank,
    rand_float,
    rand_shape,
    rand_window_attrs,
)
from rlx_edge.ir.ops._registry import Attr, OpDef, defop

# Explicit imports: family modules load in name order and "blocks" sorts first.
from rlx_edge.ir.ops.conv import conv2d, fully_connected
from rlx_edge.ir.ops.elementwise import add
from rlx_edge.ir.ops.norm import batch_norm
from rlx_edge.ir.types import TensorType

_WINDOW = ("strides", "padding", "pads", "dilations")
# an activation emitted as its own op (when it cannot be fused into the conv)
_ACTIVATION_OPS: dict[str, tuple[str, dict[str, Any]]] = {
    "relu": ("relu", {}),
    "relu6": ("relu6", {}),
    "relu_n1_to_1": ("clamp", {"min": -1.0, "max": 1.0}),
}


def _infer(op: OpDef, in_types: list, attrs: dict) -> TensorType:
    return op.run_infer(in_types, op.normalize_attrs(attrs))[0]


def _ref(op: OpDef, inputs: list, attrs: dict) -> np.ndarray:
    return op.run_reference(inputs, op.normalize_attrs(attrs))[0]


def _macs(op: OpDef, in_types: list, out_type: TensorType, attrs: dict) -> int:
    return op.count_macs(in_types, [out_type], op.normalize_attrs(attrs))


def _pick_float(rng: np.random.Generator):
    return FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]


# linear -------------------------------------------------------------------------
linear = defop(
    "linear",
    family="blocks",
    inputs=("x", "w", "b?"),
    attrs={"activation": ACTIVATION},
    stage="hir",
    doc="Linear layer x @ w.T + b with an optional activation; lowers to fully_connected.",
)


@linear.infer
def _linear_infer(x, w, b, *, activation):
    return _infer(fully_connected, [x, w, b], {"activation": activation})


@linear.reference
def _linear_ref(x, w, b, *, activation):
    return _ref(fully_connected, [x, w, b], {"activation": activation})


@linear.macs
def _linear_macs(ins, outs, *, activation):
    return _macs(fully_connected, ins, outs[0], {"activation": activation})


@linear.lower
def _linear_lower(g, ins, attrs):
    return [g.fully_connected(*ins, activation=attrs["activation"])]


@linear.sample
def _linear_sample(rng):
    dt = _pick_float(rng)
    i, o = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    x = rand_float(rng, rand_shape(rng, int(rng.integers(0, 3))) + (i,), dt)
    b = rand_float(rng, (o,), dt) if rng.random() < 0.7 else None
    activation = str(rng.choice(ACTIVATIONS))
    return [x, rand_float(rng, (o, i), dt), b], {"activation": activation}


# conv_block -------------------------------------------------------------------------
conv_block = defop(
    "conv_block",
    family="blocks",
    inputs=("x", "w", "b?", "bn_scale?", "bn_bias?", "bn_mean?", "bn_var?"),
    attrs={
        "strides": Attr("ints", (1, 1), doc="(stride_h, stride_w)"),
        "padding": PADDING,
        "pads": PADS,
        "dilations": Attr("ints", (1, 1), doc="(dilation_h, dilation_w)"),
        "activation": ACTIVATION,
        "epsilon": Attr("float", 1e-5, doc="batch norm epsilon"),
    },
    stage="hir",
    doc="conv2d, then batch norm when its four parameters are given, then the activation.",
)


def _bn_params(bn: list) -> list | None:
    """The batch norm inputs, or None when absent; a partial set is an error."""
    given = [p is not None for p in bn]
    if any(given) and not all(given):
        fail("conv_block: give all of bn_scale, bn_bias, bn_mean, bn_var or none of them")
    return bn if any(given) else None


def _conv_attrs(attrs: dict, activation: str) -> dict:
    return {**{k: attrs[k] for k in _WINDOW}, "activation": activation}


@conv_block.infer
def _cb_infer(x, w, b, bn_scale, bn_bias, bn_mean, bn_var, **attrs):
    bn = _bn_params([bn_scale, bn_bias, bn_mean, bn_var])
    y = _infer(conv2d, [x, w, b], _conv_attrs(attrs, attrs["activation"]))
    if bn is not None:
        y = _infer(batch_norm, [y, *bn], {"epsilon": attrs["epsilon"]})
    return y


@conv_block.reference
def _cb_ref(x, w, b, bn_scale, bn_bias, bn_mean, bn_var, **attrs):
    bn = _bn_params([bn_scale, bn_bias, bn_mean, bn_var])
    act = attrs["activation"]
    if bn is None:
        return _ref(conv2d, [x, w, b], _conv_attrs(attrs, act))
    y = _ref(conv2d, [x, w, b], _conv_attrs(attrs, "none"))
    y = _ref(batch_norm, [y, *bn], {"epsilon": attrs["epsilon"]})
    return apply_activation(y, act)


@conv_block.macs
def _cb_macs(ins, outs, **attrs):
    # batch norm and the activation are not multiply-accumulates of the layer
    return _macs(conv2d, ins[:3], outs[0], _conv_attrs(attrs, "none"))


@conv_block.lower
def _cb_lower(g, ins, attrs):
    x, w, b, *bn_in = ins
    bn = _bn_params(bn_in)
    act = attrs["activation"]
    # with no batch norm in between, the activation fuses into the convolution
    y = g.conv2d(x, w, b, **_conv_attrs(attrs, act if bn is None else "none"))
    if bn is not None:
        y = g.batch_norm(y, *bn, epsilon=attrs["epsilon"])
        if act != "none":
            op, op_attrs = _ACTIVATION_OPS[act]
            y = getattr(g, op)(y, **op_attrs)
    return [y]


@conv_block.sample
def _cb_sample(rng):
    dt = _pick_float(rng)
    c, o = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    attrs = rand_window_attrs(rng)
    attrs["dilations"] = tuple(int(d) for d in rng.integers(1, 3, 2))
    attrs["activation"] = str(rng.choice(ACTIVATIONS))
    x = rand_float(rng, (int(rng.integers(1, 3)), int(rng.integers(5, 9)), int(rng.integers(5, 9)), c), dt)
    b = rand_float(rng, (o,), dt) if rng.random() < 0.7 else None
    bn: list = [None] * 4
    if rng.random() < 0.6:
        var = (np.abs(rng.standard_normal(o)) + 0.1).astype(dt)
        bn = [rand_float(rng, (o,), dt) for _ in range(3)] + [var]
    return [x, rand_float(rng, (o, kh, kw, c), dt), b, *bn], attrs


# residual ------------------------------------------------------------------------------
residual = defop(
    "residual",
    family="blocks",
    inputs=("x", "w1", "b1", "w2", "b2"),
    attrs={"activation": Attr("str", "relu", choices=ACTIVATIONS, doc="activation after each stage")},
    stage="hir",
    doc="act(x + conv2d(act(conv2d(x, w1, b1)), w2, b2)), both convolutions stride 1 with 'same' padding.",
)

_SAME = {"strides": (1, 1), "padding": "same", "pads": (0, 0, 0, 0), "dilations": (1, 1)}


@residual.infer
def _res_infer(x, w1, b1, w2, b2, *, activation):
    need_rank(x, 4, "residual input")
    h = _infer(conv2d, [x, w1, b1], {**_SAME, "activation": activation})
    y = _infer(conv2d, [h, w2, b2], {**_SAME, "activation": "none"})
    if y.shape[3] != x.shape[3]:
        fail(f"residual: the second convolution gives {y.shape[3]} channels but the input has {x.shape[3]}")
    return _infer(add, [x, y], {"activation": activation})


@residual.reference
def _res_ref(x, w1, b1, w2, b2, *, activation):
    h = _ref(conv2d, [x, w1, b1], {**_SAME, "activation": activation})
    y = _ref(conv2d, [h, w2, b2], {**_SAME, "activation": "none"})
    ct = compute_dtype(y.dtype)
    return finish(apply_activation(x.astype(ct) + y.astype(ct), activation), from_numpy(y.dtype))


@residual.macs
def _res_macs(ins, outs, *, activation):
    x, w1, b1, w2, b2 = ins
    attrs = {**_SAME, "activation": "none"}
    h = _infer(conv2d, [x, w1, b1], attrs)
    return _macs(conv2d, [x, w1, b1], h, attrs) + _macs(conv2d, [h, w2, b2], outs[0], attrs)


@residual.lower
def _res_lower(g, ins, attrs):
    x, w1, b1, w2, b2 = ins
    act = attrs["activation"]
    h = g.conv2d(x, w1, b1, **_SAME, activation=act)
    y = g.conv2d(h, w2, b2, **_SAME)
    return [g.add(x, y, activation=act)]


@residual.sample
def _res_sample(rng):
    dt = _pick_float(rng)
    c, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    k1, k2 = (int(k) for k in rng.integers(1, 4, 2))
    x = rand_float(rng, (int(rng.integers(1, 3)), int(rng.integers(3, 8)), int(rng.integers(3, 8)), c), dt)
    ins = [x, rand_float(rng, (m, k1, k1, c), dt), rand_float(rng, (m,), dt)]
    ins += [rand_float(rng, (c, k2, k2, m), dt), rand_float(rng, (c,), dt)]
    return ins, {"activation": str(rng.choice(ACTIVATIONS))}
