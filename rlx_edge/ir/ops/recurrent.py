"""Recurrent ops: SVDF (TFLite's rank-decomposed time filter, keyword spotting models).

State is functional. TFLite keeps SVDF's activation state in a variable tensor
that the op rewrites on every invoke; the IR has no mutable values, so the
state is an explicit input and the updated state an extra output:
``svdf(x, weights_feature, weights_time, state, bias?) -> (y, new_state)``.
A caller that runs a sequence feeds each invoke's ``new_state`` back as the
next ``state`` (the TFLite importer makes the variable tensor a graph input
and its update a graph output, and records the pairs in
``graph.metadata["state"]``). The optional bias comes last, as for every op,
although TFLite lists it before the state.

Shapes (TFLite's): x [B, I], weights_feature [F, I], weights_time [F, M],
state [B, F * M] (each filter's M most recent feature activations, oldest
first), bias [F / rank], y [B, F / rank].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy, promote
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    apply_activation,
    compute_dtype,
    fail,
    finish,
    need_rank,
    rand_float,
)
from rlx_edge.ir.ops._quantized import clamp_cast, scalar_params, storage_range
from rlx_edge.ir.ops._registry import Attr, QContext, defop
from rlx_edge.ir.shape import static_dim
from rlx_edge.ir.types import QuantParams, TensorType

svdf = defop(
    "svdf",
    family="recurrent",
    inputs=("x", "weights_feature", "weights_time", "state", "bias?"),
    attrs={"rank": Attr("int", 1, doc="filters per output unit"), "activation": ACTIVATION},
    num_outputs=2,
    # int8 activations only, as TFLite Micro (the state and time weights may be int8 or int16)
    int_dtypes=("i8",),
    differentiable=False,
    doc="SVDF: y [B, F/rank] and the updated state [B, F*M] from x [B, I] and the previous state.",
)


def _dims(x: TensorType, wf: TensorType, wt: TensorType, rank: int) -> tuple[int, int, int, int]:
    """(inputs I, filters F, memory M, units U) of a well-formed call."""
    n_in = static_dim(x.shape[1], "svdf input features")
    filters, wf_in = (static_dim(d, "svdf weights_feature dimension") for d in wf.shape)
    wt_f, memory = (static_dim(d, "svdf weights_time dimension") for d in wt.shape)
    if wf_in != n_in:
        fail(f"svdf: weights_feature [{filters}, {wf_in}] must have {n_in} columns (the input features)")
    if wt_f != filters:
        fail(f"svdf: weights_time has {wt_f} rows, weights_feature {filters} filters")
    if rank < 1 or filters % rank:
        fail(f"svdf: rank {rank} must be positive and divide the {filters} filters")
    if memory < 1:
        fail("svdf: weights_time needs at least one memory column")
    return n_in, filters, memory, filters // rank


@svdf.infer
def _svdf_infer(x, weights_feature, weights_time, state, bias, *, rank, activation):
    for t, what in ((x, "input"), (weights_feature, "weights_feature"), (weights_time, "weights_time"),
                    (state, "state")):  # fmt: skip
        need_rank(t, 2, f"svdf {what}")
    _, filters, memory, units = _dims(x, weights_feature, weights_time, rank)
    batch = x.shape[0]
    if tuple(state.shape) != (batch, filters * memory):
        fail(f"svdf: state shape {list(state.shape)} must be [{batch}, {filters * memory}] (batch, filters x memory)")
    if bias is not None and (bias.rank != 1 or bias.shape[0] != units):
        fail(f"svdf: bias shape {list(bias.shape)} must be [{units}] (filters / rank)")
    if x.dtype.is_float:
        for t, what in ((weights_feature, "weights_feature"), (weights_time, "weights_time"), (state, "state"),
                        (bias, "bias")):  # fmt: skip
            if t is not None and not t.dtype.is_float:
                fail(f"svdf: float input needs a float {what}, got {t.dtype}")
        dt = promote(x.dtype, weights_feature.dtype)
        return TensorType((batch, units), dt), TensorType(tuple(state.shape), state.dtype)
    if x.dtype != DType.i8 or weights_feature.dtype != DType.i8:
        fail(f"svdf: quantized input and weights_feature must be i8, got {x.dtype} and {weights_feature.dtype}")
    if state.dtype not in (DType.i8, DType.i16) or weights_time.dtype != state.dtype:
        fail(f"svdf: quantized state and weights_time must both be i8 or both i16, got {state.dtype} and "
             f"{weights_time.dtype}")  # fmt: skip
    if bias is not None and bias.dtype != DType.i32:
        fail(f"svdf: quantized bias must be i32, got {bias.dtype}")
    return TensorType((batch, units), DType.i8), TensorType(tuple(state.shape), state.dtype)


def _shifted(state: Any, filters: int, memory: int, newest: Any) -> Any:
    """The state one step on: every filter's history moves one place older and ``newest`` [B, F] enters last.

    TFLite moves the whole buffer one element left and then writes each
    filter's last slot, which is the same thing per filter.
    """
    xp = fp.namespace(state, newest)
    rows = state.reshape(state.shape[0], filters, memory)
    rows = xp.concatenate([rows[:, :, 1:], newest.astype(state.dtype)[:, :, None]], axis=2)
    return rows.reshape(state.shape[0], filters * memory)


@svdf.reference
def _svdf_ref(x, weights_feature, weights_time, state, bias, *, rank, activation):
    """TFLite Micro's EvalFloatSvdfReference: feature product, shift, time product, rank sum, bias, activation."""
    filters, memory = weights_time.shape
    ct = compute_dtype(x.dtype)
    newest = x.astype(ct) @ weights_feature.astype(ct).T  # [B, F]
    new_state = _shifted(state, filters, memory, newest)
    hist = new_state.astype(ct).reshape(x.shape[0], filters, memory)
    per_filter = (hist * weights_time.astype(ct)).sum(axis=2)  # [B, F]
    y = per_filter.reshape(x.shape[0], filters // rank, rank).sum(axis=2)
    if bias is not None:
        y = y + bias.astype(ct)
    out_dt = promote(from_numpy(x.dtype), from_numpy(weights_feature.dtype))
    return finish(apply_activation(y, activation), out_dt), new_state


# integer semantics ----------------------------------------------------------------------------
# TFLite Micro's PrepareSvdf and EvalIntegerSvdfReference. Its integer kernel ignores the fused
# activation (it clamps to int8 only), and so does this one: the graphs it runs are TFLite Micro's.
def _effective_scale(a: float, b: float, c: float) -> float:
    """``a * b / c`` of float32 scales, computed in double.

    TFLite Micro's source reads as if the product were taken in float32, but the
    interpreter we pin to computes it in double: the float32 product moves the
    multiplier's last bits, which flips rare roundings (keyword_scrambled's first
    layer, once in a dozen invokes).
    """
    return float(np.float32(a)) * float(np.float32(b)) / float(np.float32(c))


@svdf.prepare
def _svdf_prepare(ctx: QContext, *, rank: int, activation: str) -> dict[str, Any]:
    xt, wft, wtt, st = ctx.in_types[:4]
    bt = ctx.in_types[4] if len(ctx.in_types) > 4 else None
    yt = ctx.out_types[0]
    s_x, zp_x = scalar_params(xt.quant, "svdf input")
    s_wf, zp_wf = scalar_params(wft.quant, "svdf weights_feature")
    s_wt, zp_wt = scalar_params(wtt.quant, "svdf weights_time")
    if zp_wf or zp_wt:  # TFLite Micro reads neither zero point: only symmetric weights mean what they say
        raise ValueError(f"svdf weights must be symmetric (zero points {zp_wf} and {zp_wt}, not 0)")
    s_s, zp_s = scalar_params(st.quant, "svdf state")
    s_y, zp_y = scalar_params(yt.quant, "svdf output")
    if bt is not None:
        s_b, _ = scalar_params(bt.quant, "svdf bias")
        # TFLite Micro refuses any other bias scale (the kernel adds the bias to time sums unscaled)
        if abs(float(s_b) - float(np.float32(s_s) * np.float32(s_wt))) >= 1e-5:
            raise ValueError(f"svdf bias scale {s_b} must be state scale x weights_time scale ({s_s} x {s_wt})")
    m1, e1 = fp.quantize_multiplier(_effective_scale(s_x, s_wf, s_s))
    m2, e2 = fp.quantize_multiplier(_effective_scale(s_s, s_wt, s_y))
    state_lo, state_hi = storage_range(st.dtype.numpy)
    return {
        "in_zp": zp_x, "state_zp": zp_s, "out_zp": zp_y,
        "feature_mult": m1, "feature_shift": e1, "out_mult": m2, "out_shift": e2,
        "state_min": state_lo, "state_max": state_hi, "state_dtype": st.dtype.numpy.name,
    }  # fmt: skip


@svdf.eval
def _svdf_eval(p, x, weights_feature, weights_time, state, bias, *, rank, activation):
    """int32 sums wrap as TFLite Micro's do; numpy or jax.numpy."""
    xp = fp.namespace(x, state)
    filters, memory = weights_time.shape
    batch = x.shape[0]
    xs = xp.asarray(x).astype(xp.int64) - p.in_zp
    dot = fp.wrap_int32(xs @ xp.asarray(weights_feature).astype(xp.int64).T)  # [B, F]
    # The TFLite Micro we pin to clamps to the state type before adding the state's zero point, and the
    # store wraps (a non-zero zero point is int8 states only); later versions add it before the clamp.
    newest = xp.clip(fp.multiply_by_quantized_multiplier(dot, p.feature_mult, p.feature_shift), p.state_min,
                     p.state_max) + p.state_zp  # fmt: skip
    span = p.state_max - p.state_min + 1
    newest = ((newest - p.state_min) % span + p.state_min).astype(p.state_dtype)
    new_state = _shifted(xp.asarray(state), filters, memory, newest)
    hist = new_state.astype(xp.int64).reshape(batch, filters, memory) - p.state_zp
    per_filter = fp.wrap_int32((hist * xp.asarray(weights_time).astype(xp.int64)).sum(axis=2))
    acc = per_filter.reshape(batch, filters // rank, rank).sum(axis=2)
    if bias is not None:
        acc = acc + xp.asarray(bias).astype(xp.int64)
    acc = fp.wrap_int32(acc)
    y = fp.multiply_by_quantized_multiplier(acc, p.out_mult, p.out_shift) + p.out_zp
    lo, hi = storage_range(np.int8)
    return clamp_cast(y, lo, hi, np.int8), new_state


@svdf.macs
def _svdf_macs(ins, outs, **attrs):
    x, wf, wt = ins[0], ins[1], ins[2]
    batch = int(x.shape[0])
    return batch * (int(wf.shape[0]) * int(wf.shape[1]) + int(wt.shape[0]) * int(wt.shape[1]))


# sampler --------------------------------------------------------------------------------------
def _svdf_shapes(rng: np.random.Generator) -> tuple[int, int, int, int, int]:
    batch, n_in = int(rng.integers(1, 3)), int(rng.integers(1, 9))
    rank, units, memory = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
    return batch, n_in, rank, units, memory


@svdf.sample
def _svdf_sample(rng):
    """Float draws, and (half of them) int8 draws with int8 or int16 state as TFLite Micro takes them.

    The quantized draws carry their own parameters, the bias scale the one the kernel
    assumes: PTQ keeps SVDF float (its state wants a type of its own).
    """
    batch, n_in, rank, units, memory = _svdf_shapes(rng)
    filters = units * rank
    attrs = {"rank": rank, "activation": str(rng.choice(["none", "relu"]))}
    if rng.random() < 0.5:
        dt = np.float32
        x = rand_float(rng, (batch, n_in), dt)
        wf = rand_float(rng, (filters, n_in), dt, 0.5)
        wt = rand_float(rng, (filters, memory), dt, 0.5)
        state = rand_float(rng, (batch, filters * memory), dt)
        b = rand_float(rng, (units,), dt) if rng.random() < 0.7 else None
        return [x, wf, wt, state, b], attrs
    sdt = np.int16 if rng.random() < 0.6 else np.int8
    s_lo, s_hi = storage_range(sdt)
    s_x, s_wf, s_wt = (float(np.float32(rng.uniform(lo, hi))) for lo, hi in ((0.01, 0.1), (0.002, 0.02), (1e-3, 1e-2)))
    s_s = float(np.float32(rng.uniform(1e-3, 1e-2) if sdt == np.int16 else rng.uniform(0.02, 0.2)))
    zp_s = 0 if sdt == np.int16 else int(rng.integers(-20, 21))
    x = rng.integers(-128, 128, (batch, n_in)).astype(np.int8)
    wf = rng.integers(-127, 128, (filters, n_in)).astype(np.int8)
    wt = rng.integers(s_lo + 1, s_hi + 1, (filters, memory)).astype(sdt)
    state = rng.integers(s_lo, s_hi + 1, (batch, filters * memory)).astype(sdt)
    b = rng.integers(-(2**14), 2**14, (units,)).astype(np.int32)
    s_b = float(np.float32(s_s) * np.float32(s_wt))
    in_q = [
        QuantParams(s_x, int(rng.integers(-20, 21))),
        QuantParams(s_wf, 0),
        QuantParams(s_wt, 0, storage=from_numpy(np.dtype(sdt))),
        QuantParams(s_s, zp_s, storage=from_numpy(np.dtype(sdt))),
        QuantParams(s_b, 0, storage=DType.i32),
    ]
    # an output scale near what the sums reach keeps the draw off both int8 limits
    s_y = float(np.float32(rng.uniform(0.5, 4.0) * s_s * s_wt * max(s_hi, 1) * 4))
    out_q = [QuantParams(s_y, int(rng.integers(-10, 11))), in_q[3]]
    return [x, wf, wt, state, b], attrs, out_q, in_q
