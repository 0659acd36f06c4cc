"""Transformer HIR blocks: ``swiglu_ffn``, ``residual_rms_norm``, ``residual_layer_norm``, ``embedding``.

Each lowers to MIR ops (see ``rlx_edge.ir.passes.lower_hir``) and composes its
inference, float reference and MAC count from those same ops, so a block never
restates their rules and its reference is its lowered graph's up to float
rounding order. Integer forms come from the MIR ops: fully_connected, silu
(lookup table), mul and add as TFLite; layer_norm and rms_norm with our own
integer semantics (``norm.py``); gather moves stored bytes.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops._common import fail, rand_float, rand_shape
from rlx_edge.ir.ops._registry import Attr, OpDef, defop
from rlx_edge.ir.ops.activation import silu
from rlx_edge.ir.ops.blocks import _infer, _macs, _pick_float, _ref
from rlx_edge.ir.ops.conv import fully_connected
from rlx_edge.ir.ops.elementwise import add, mul
from rlx_edge.ir.ops.movement import gather
from rlx_edge.ir.ops.norm import layer_norm, rms_norm

_FC = {"activation": "none"}


# swiglu_ffn -----------------------------------------------------------------------------
swiglu_ffn = defop(
    "swiglu_ffn",
    family="transformer",
    inputs=("x", "w_gate", "w_up", "w_down", "b_gate?", "b_up?", "b_down?"),
    stage="hir",
    doc="SwiGLU feed-forward: fc(silu(fc(x, w_gate)) * fc(x, w_up), w_down); weights [out, in] as fully_connected.",
)


def _swiglu_hidden(x, w_gate, w_up, b_gate, b_up):
    gate = _infer(fully_connected, [x, w_gate, b_gate], _FC)
    up = _infer(fully_connected, [x, w_up, b_up], _FC)
    if tuple(gate.shape) != tuple(up.shape):
        fail(f"swiglu_ffn: w_gate gives {list(gate.shape)} but w_up gives {list(up.shape)}; they must agree")
    return _infer(mul, [_infer(silu, [gate], {}), up], {})


@swiglu_ffn.infer
def _swiglu_infer(x, w_gate, w_up, w_down, b_gate, b_up, b_down):
    h = _swiglu_hidden(x, w_gate, w_up, b_gate, b_up)
    return _infer(fully_connected, [h, w_down, b_down], _FC)


@swiglu_ffn.reference
def _swiglu_ref(x, w_gate, w_up, w_down, b_gate, b_up, b_down):
    gate = _ref(silu, [_ref(fully_connected, [x, w_gate, b_gate], _FC)], {})
    h = _ref(mul, [gate, _ref(fully_connected, [x, w_up, b_up], _FC)], {})
    return _ref(fully_connected, [h, w_down, b_down], _FC)


@swiglu_ffn.macs
def _swiglu_macs(ins, outs):
    x, w_gate, w_up, w_down, b_gate, b_up, b_down = ins
    gate = _infer(fully_connected, [x, w_gate, b_gate], _FC)
    h = _swiglu_hidden(x, w_gate, w_up, b_gate, b_up)
    # the gating product is one multiply per hidden value, no accumulation: not counted
    return (
        _macs(fully_connected, [x, w_gate, b_gate], gate, _FC)
        + _macs(fully_connected, [x, w_up, b_up], gate, _FC)
        + _macs(fully_connected, [h, w_down, b_down], outs[0], _FC)
    )


@swiglu_ffn.lower
def _swiglu_lower(g, ins, attrs):
    x, w_gate, w_up, w_down, b_gate, b_up, b_down = ins
    gate = g.silu(g.fully_connected(x, w_gate, b_gate))
    h = g.mul(gate, g.fully_connected(x, w_up, b_up))
    return [g.fully_connected(h, w_down, b_down)]


@swiglu_ffn.sample
def _swiglu_sample(rng):
    dt = _pick_float(rng)
    e, hidden = int(rng.integers(1, 9)), int(rng.integers(1, 13))
    x = rand_float(rng, rand_shape(rng, int(rng.integers(0, 3))) + (e,), dt)
    ws = [rand_float(rng, (hidden, e), dt), rand_float(rng, (hidden, e), dt), rand_float(rng, (e, hidden), dt)]
    bs = [rand_float(rng, (n,), dt) if rng.random() < 0.5 else None for n in (hidden, hidden, e)]
    return [x, *ws, *bs], {}


# residual_rms_norm / residual_layer_norm ------------------------------------------------------
_NORM_ATTRS = {"axis": Attr("int", -1, doc="normalize over dims axis..end")}
residual_rms_norm = defop(
    "residual_rms_norm",
    family="transformer",
    inputs=("x", "residual", "gamma"),
    attrs={**_NORM_ATTRS, "epsilon": Attr("float", 1e-6, doc="added to the mean square before the square root")},
    num_outputs=2,
    stage="hir",
    doc="s = x + residual; outputs [rms_norm(s, gamma), s] (the normalized value and the new residual stream).",
)
residual_layer_norm = defop(
    "residual_layer_norm",
    family="transformer",
    inputs=("x", "residual", "gamma", "beta?"),
    attrs={**_NORM_ATTRS, "epsilon": Attr("float", 1e-5, doc="added to the variance before the square root")},
    num_outputs=2,
    stage="hir",
    doc="s = x + residual; outputs [layer_norm(s, gamma, beta), s] (the normalized value and the new residual stream).",
)


def _residual_norm(block: OpDef, norm: OpDef) -> None:
    @block.infer
    def _infer_(x, residual, gamma, beta=None, *, axis, epsilon):
        s = _infer(add, [x, residual], {})
        if tuple(s.shape) != tuple(x.shape):
            fail(f"{block.name}: residual {list(residual.shape)} must have the shape of x {list(x.shape)}")
        params = [gamma, beta] if norm is layer_norm else [gamma]
        return [_infer(norm, [s, *params], {"axis": axis, "epsilon": epsilon}), s]

    @block.reference
    def _ref_(x, residual, gamma, beta=None, *, axis, epsilon):
        s = _ref(add, [x, residual], {})
        params = [gamma, beta] if norm is layer_norm else [gamma]
        return [_ref(norm, [s, *params], {"axis": axis, "epsilon": epsilon}), s]

    @block.macs
    def _macs_(ins, outs, *, axis, epsilon):
        # the add and the norm as their MIR ops count them
        x, residual, *params = ins
        attrs = {"axis": axis, "epsilon": epsilon}
        params = params if norm is layer_norm else params[:1]
        return _macs(add, [x, residual], outs[1], {}) + _macs(norm, [outs[1], *params], outs[0], attrs)

    @block.lower
    def _lower(g, ins, attrs):
        s = g.add(ins[0], ins[1])
        params = ins[2:] if norm is layer_norm else ins[2:3]
        return [getattr(g, norm.name)(s, *params, axis=attrs["axis"], epsilon=attrs["epsilon"]), s]

    @block.sample
    def _sample(rng):
        dt = _pick_float(rng)
        shape = rand_shape(rng, int(rng.integers(1, 4)))
        axis = int(rng.integers(-len(shape), len(shape)))
        tail = shape[axis % len(shape) :]
        ins = [rand_float(rng, shape, dt, scale=2.0), rand_float(rng, shape, dt), rand_float(rng, tail, dt)]
        if norm is layer_norm:
            ins.append(rand_float(rng, tail, dt) if rng.random() < 0.7 else None)
        return ins, {"axis": axis}


_residual_norm(residual_rms_norm, rms_norm)
_residual_norm(residual_layer_norm, layer_norm)


# embedding ----------------------------------------------------------------------------------------
embedding = defop(
    "embedding",
    family="transformer",
    inputs=("ids", "table"),
    stage="hir",
    differentiable=False,  # as gather, which it lowers to (a table gradient needs a scatter-add)
    doc=(
        "Rows of table [V, E] picked by integer ids [...] -> [..., E]; lowers to gather(table, ids, axis=0). "
        "Ids count from the end when negative, as gather; ids outside [-V, V) are an error (naming the node) in "
        "the reference; compiled targets have no error path and write their gather's fill (Cortex-M zero bytes, "
        "JAX NaN or the type's minimum)."
    ),
)


@embedding.infer
def _emb_infer(ids, table):
    if table.rank != 2:
        fail(f"embedding: table must be [V, E], got shape {list(table.shape)}")
    return _infer(gather, [table, ids], {"axis": 0})


@embedding.reference
def _emb_ref(ids, table):
    return _ref(gather, [table, ids], {"axis": 0})


@embedding.macs
def _emb_macs(ins, outs):
    ids, table = ins
    return _macs(gather, [table, ids], outs[0], {"axis": 0})  # moves rows: none


@embedding.lower
def _emb_lower(g, ins, attrs):
    ids, table = ins
    return [g.gather(table, ids, axis=0)]


@embedding.sample
def _emb_sample(rng):
    dt = _pick_float(rng)
    v, e = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    ids = rng.integers(-v, v, rand_shape(rng, int(rng.integers(0, 3)))).astype(np.int32)
    return [ids, rand_float(rng, (v, e), dt)], {}
