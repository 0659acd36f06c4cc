"""Recurrent ops: SVDF (TFLite's rank-decomposed time filter, keyword spotting models) and LSTM
(TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM, whose hidden and cell states are handled the same way).

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

import sys
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
from rlx_edge.ir.ops._quantized import clamp_cast, requantize_acc, scalar_params, storage_range
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


# LSTM -------------------------------------------------------------------------------------------
# TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite Micro runs it: no peephole, projection, layer
# norm or coupled input gate (TFLite Micro refuses them), tanh on the cell gate (its kernel takes
# no other activation a TFLite file can name).
# Hidden and cell state are variable tensors there; here, as SVDF's, they are inputs and their
# updates extra outputs:
# ``lstm(x, w_*, r_*, b_*, hidden, cell) -> (y, new_hidden, new_cell)``.
_GATES = ("input", "forget", "cell", "output")

lstm = defop(
    "lstm",
    family="recurrent",
    inputs=("x", *(f"{k}_{g}" for k in "wrb" for g in _GATES), "hidden", "cell"),
    attrs={
        "cell_clip": Attr("float", 0.0, doc="the cell state is clipped to [-cell_clip, cell_clip]; 0: no clip"),
        "time_major": Attr("bool", False, doc="x is [T, B, I] (else [B, T, I]); y follows"),
    },
    num_outputs=3,
    # int8 activations (int16 cell) and int16x8, as TFLite Micro's kernel
    int_dtypes=("i8", "i16"),
    differentiable=False,
    doc="LSTM over a sequence: y [B, T, S] (every step's hidden state) and the updated hidden and cell "
    "states [B, S] from x [B, T, I]; gate weights w_* [S, I], recurrent weights r_* [S, S], biases b_* [S].",
)


def _lstm_dims(x: TensorType, hidden: TensorType, time_major: bool) -> tuple[int, int, int, int]:
    """(batch B, steps T, inputs I, state S) of a well-formed call."""
    need_rank(x, 3, "lstm input")
    need_rank(hidden, 2, "lstm hidden state")
    steps, batch = (static_dim(d, "lstm input dimension") for d in x.shape[:2])
    if not time_major:
        steps, batch = batch, steps
    n_in = static_dim(x.shape[2], "lstm input features")
    state = static_dim(hidden.shape[1], "lstm state size")
    if static_dim(hidden.shape[0], "lstm hidden state batch") != batch:
        fail(f"lstm: hidden state shape {list(hidden.shape)} must be [{batch}, S] (the input's batch)")
    return batch, steps, n_in, state


@lstm.infer
def _lstm_infer(x, *rest, cell_clip, time_major):
    ws, rs, bs, hidden, cell = rest[0:4], rest[4:8], rest[8:12], rest[12], rest[13]
    batch, steps, n_in, state = _lstm_dims(x, hidden, time_major)
    if tuple(cell.shape) != tuple(hidden.shape):
        fail(f"lstm: cell state shape {list(cell.shape)} must equal the hidden state's {list(hidden.shape)}")
    for g, w, r, b in zip(_GATES, ws, rs, bs):
        if tuple(w.shape) != (state, n_in):
            fail(f"lstm: w_{g} shape {list(w.shape)} must be [{state}, {n_in}] (state, input features)")
        if tuple(r.shape) != (state, state):
            fail(f"lstm: r_{g} shape {list(r.shape)} must be [{state}, {state}] (state, state)")
        if tuple(b.shape) != (state,):
            fail(f"lstm: b_{g} shape {list(b.shape)} must be [{state}]")
    if cell_clip < 0:
        fail(f"lstm: cell_clip {cell_clip} must be >= 0")
    y_shape = (steps, batch, state) if time_major else (batch, steps, state)
    if x.dtype.is_float:
        for t in (*ws, *rs, *bs, hidden, cell):
            if not t.dtype.is_float:
                fail(f"lstm: a float input needs float weights, biases and states, got {t.dtype}")
        return (
            TensorType(y_shape, x.dtype),
            TensorType(tuple(hidden.shape), hidden.dtype),
            TensorType(tuple(cell.shape), cell.dtype),
        )
    if x.dtype not in (DType.i8, DType.i16) or hidden.dtype != x.dtype:
        fail(f"lstm: quantized input and hidden state must both be i8 or both i16, got {x.dtype} and {hidden.dtype}")
    bias_dt = DType.i32 if x.dtype == DType.i8 else DType.i64
    for t in (*ws, *rs):
        if t.dtype != DType.i8:
            fail(f"lstm: quantized weights must be i8, got {t.dtype}")
    for t in bs:
        if t.dtype != bias_dt:
            fail(f"lstm: {x.dtype} activations need {bias_dt} biases, got {t.dtype}")
    if cell.dtype != DType.i16:
        fail(f"lstm: a quantized cell state must be i16 (TFLite Micro's only one), got {cell.dtype}")
    return (TensorType(y_shape, x.dtype), TensorType(tuple(hidden.shape), hidden.dtype),
            TensorType(tuple(cell.shape), cell.dtype))  # fmt: skip


def _sequence(xp: Any, x: Any, time_major: bool) -> Any:
    """x as [T, B, I]."""
    return x if time_major else xp.swapaxes(x, 0, 1)


def _sigmoid_f(xp: Any, v: Any) -> Any:
    """TFLite's float reference Logistic: 1 above 16.619..., exp(v) below -9, else 1 / (1 + exp(-v))."""
    middle = 1 / (1 + xp.exp(-xp.clip(v, -9, 17)))  # clipped: no overflow where the other branches apply
    return xp.where(v > np.float32(16.619047164916992188), 1, xp.where(v < -9, xp.exp(xp.minimum(v, 0)), middle))


def _scan(xp: Any, step: Any, carry: Any, seq: Any) -> tuple[Any, Any]:
    """``step(carry, x_t) -> (carry, y_t)`` over the leading axis of ``seq``: ``(carry, stacked y)``.

    numpy loops; jax runs ``jax.lax.scan``, so XLA compiles one step rather than every step unrolled
    (a 28-step int8 LSTM unrolled takes XLA minutes and gigabytes).
    """
    if xp is np:
        ys = []
        for xt in seq:
            carry, y = step(carry, xt)
            ys.append(y)
        return carry, np.stack(ys)
    return sys.modules["jax"].lax.scan(step, carry, seq)  # jax is loaded: xp is jax.numpy


@lstm.reference
def _lstm_ref(x, *rest, cell_clip, time_major):
    """TFLite Micro's float LstmStep: forget, input and cell gates, cell update and clip, output gate, hidden."""
    xp = fp.namespace(x, rest[12], rest[13])
    ct = compute_dtype(x.dtype)
    ws, rs, bs = ([t.astype(ct) for t in rest[k : k + 4]] for k in (0, 4, 8))
    clip = float(np.float32(cell_clip))

    def sigmoid(v: Any) -> Any:
        return _sigmoid_f(xp, v)

    def step(hc: tuple[Any, Any], xt: Any) -> tuple[tuple[Any, Any], Any]:
        h, c = hc

        def gate(k: int, fn: Any) -> Any:
            return fn((xt @ ws[k].T + bs[k]) + h @ rs[k].T)

        f, i, g = gate(1, sigmoid), gate(0, sigmoid), gate(2, xp.tanh)
        c = f * c + i * g
        if clip > 0:
            c = xp.clip(c, -clip, clip)
        h = xp.tanh(c) * gate(3, sigmoid)
        return (h, c), h

    (h, c), ys = _scan(xp, step, (rest[12].astype(ct), rest[13].astype(ct)), _sequence(xp, x.astype(ct), time_major))
    y = _sequence(xp, ys, time_major)
    return (finish(y, from_numpy(x.dtype)), finish(h, from_numpy(rest[12].dtype)),
            finish(c, from_numpy(rest[13].dtype)))  # fmt: skip


# integer semantics: TFLite Micro's PrepareGateParametersInteger / CreateLstmCellStateInfo and
# lstm_internal::LstmStep. Gate sums are int16 at 2**-12 (Q3.12), gate outputs int16 at 2**-15.
_GATE_IN_SCALE = 2.0**-12
_GATE_OUT_SCALE = 2.0**-15


@lstm.prepare
def _lstm_prepare(ctx: QContext, *, cell_clip: float, time_major: bool) -> dict[str, Any]:
    ts = ctx.in_types
    s_x, zp_x = scalar_params(ts[0].quant, "lstm input")
    s_h, zp_h = scalar_params(ts[13].quant, "lstm hidden state")
    s_c, zp_c = scalar_params(ts[14].quant, "lstm cell state")
    if zp_c:  # TFLite Micro never reads the cell state's zero point
        raise ValueError(f"lstm cell state must be symmetric (zero point {zp_c}, not 0)")
    x_mult, x_shift, h_mult, h_shift = [], [], [], []
    for k, g in enumerate(_GATES):
        s_w, zp_w = scalar_params(ts[1 + k].quant, f"lstm w_{g}")
        s_r, zp_r = scalar_params(ts[5 + k].quant, f"lstm r_{g}")
        if zp_w or zp_r:
            raise ValueError(f"lstm weights must be symmetric (w_{g} zero point {zp_w}, r_{g} {zp_r})")
        m, e = fp.quantize_multiplier(_effective_scale(s_x, s_w, _GATE_IN_SCALE))
        x_mult.append(m)
        x_shift.append(e)
        m, e = fp.quantize_multiplier(_effective_scale(s_h, s_r, _GATE_IN_SCALE))
        h_mult.append(m)
        h_shift.append(e)
    fc_m, fc_e = fp.quantize_multiplier(_effective_scale(_GATE_OUT_SCALE, s_c, s_c))
    ig_m, ig_e = fp.quantize_multiplier(_effective_scale(_GATE_OUT_SCALE, _GATE_OUT_SCALE, s_c))
    hid_m, hid_e = fp.quantize_multiplier(_effective_scale(_GATE_OUT_SCALE, _GATE_OUT_SCALE, s_h))
    # Tanh of the cell state: TFLite Micro's lstm_internal::Tanh from the scale's power of two
    # (rounded: TFLite Micro ignores whether CheckedLog2 found the scale one)
    tanh_shift, tanh_mult = 15 + fp.checked_log2(s_c)[0] - 3, 0
    if tanh_shift < 0:
        tanh_shift, tanh_mult = -tanh_shift, 3
    clip = float(np.float32(cell_clip))
    qclip = int(min(max(clip / float(np.float32(s_c)), -32768.0), 32767.0)) if clip > 0 else 0
    h_lo, h_hi = storage_range(ts[13].dtype.numpy)
    return {
        "wide": ts[0].dtype == DType.i16, "in_zp": zp_x, "hidden_zp": zp_h,
        "x_mult": tuple(x_mult), "x_shift": tuple(x_shift), "h_mult": tuple(h_mult), "h_shift": tuple(h_shift),
        "forget_mult": fc_m, "forget_shift": fc_e, "input_mult": ig_m, "input_shift": ig_e,
        "hidden_mult": hid_m, "hidden_shift": hid_e, "hidden_min": h_lo, "hidden_max": h_hi,
        "tanh_mult": tanh_mult, "tanh_shift": tanh_shift, "cell_clip": qclip,
    }  # fmt: skip


@lstm.eval
def _lstm_eval(p, x, *rest, cell_clip, time_major):
    """int32 (int8) or int64 (int16x8) sums; int16 gates through TFLite's int16 Logistic / Tanh."""
    xp = fp.namespace(x, rest[12], rest[13])
    ws, rs, bs = ([xp.asarray(t).astype(xp.int64) for t in rest[k : k + 4]] for k in (0, 4, 8))
    h, c = xp.asarray(rest[12]).astype(xp.int64), xp.asarray(rest[13]).astype(xp.int64)
    lo16, hi16 = storage_range(np.int16)

    def fc(v: Any, w: Any, mult: int, shift: int, bias: Any = None) -> Any:
        acc = v @ w.T
        if bias is not None:
            acc = acc + bias
        return xp.clip(requantize_acc(acc, mult, shift, p.wide), lo16, hi16)

    def mul(a: Any, b: Any, mult: int, shift: int, zp: int = 0, lo: int = lo16, hi: int = hi16) -> Any:
        return xp.clip(fp.multiply_by_quantized_multiplier(a * b, mult, shift) + zp, lo, hi)

    def sigmoid(v: Any) -> Any:
        return xp.asarray(fp.logistic_int16(v.astype(xp.int16), 0, 0)).astype(xp.int64)

    def tanh(v: Any, mult: int = 0, shift: int = 0) -> Any:
        return xp.asarray(fp.tanh_int16(v.astype(xp.int16), mult, shift)).astype(xp.int64)

    def step(hc: tuple[Any, Any], xt: Any) -> tuple[tuple[Any, Any], Any]:
        h, c = hc
        hs = h - p.hidden_zp

        def gate(k: int, fn: Any) -> Any:
            s = fc(xt, ws[k], p.x_mult[k], p.x_shift[k], bs[k]) + fc(hs, rs[k], p.h_mult[k], p.h_shift[k])
            return fn(xp.clip(s, lo16, hi16))

        f, i, g = gate(1, sigmoid), gate(0, sigmoid), gate(2, tanh)
        c = xp.clip(mul(f, c, p.forget_mult, p.forget_shift) + mul(i, g, p.input_mult, p.input_shift), lo16, hi16)
        if p.cell_clip:
            c = xp.clip(c, -p.cell_clip, p.cell_clip)
        o = gate(3, sigmoid)  # from the previous hidden state, as the other gates
        h = mul(tanh(c, p.tanh_mult, p.tanh_shift), o, p.hidden_mult, p.hidden_shift, p.hidden_zp, p.hidden_min,
                p.hidden_max)  # fmt: skip
        return (h, c), h

    seq = _sequence(xp, xp.asarray(x).astype(xp.int64) - p.in_zp, time_major)
    (h, c), ys = _scan(xp, step, (h, c), seq)
    act_dt = np.int16 if p.wide else np.int8
    return _sequence(xp, ys, time_major).astype(act_dt), h.astype(act_dt), c.astype(np.int16)


@lstm.macs
def _lstm_macs(ins, outs, **attrs):
    x, hidden = ins[0], ins[13]
    steps_batch = int(x.shape[0]) * int(x.shape[1])
    n_in, state = int(x.shape[2]), int(hidden.shape[1])
    return steps_batch * 4 * state * (n_in + state)


@lstm.sample
def _lstm_sample(rng):
    """Float draws, and int8 (int16 cell) or int16x8 draws carrying their own parameters as TFLite's
    converter makes them (symmetric weights, a power-of-two cell scale): PTQ keeps the op float."""
    batch, steps, n_in, state = (int(rng.integers(1, hi)) for hi in (3, 5, 7, 6))
    time_major = bool(rng.random() < 0.3)
    attrs = {
        "cell_clip": float(np.float32(rng.choice([0.0, 3.0, 10.0]))),
        "time_major": time_major,
    }
    x_shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    w_shapes = [(state, n_in)] * 4 + [(state, state)] * 4
    if rng.random() < 0.4:
        dt = np.float32
        x = rand_float(rng, x_shape, dt)
        weights = [rand_float(rng, s, dt, 0.5) for s in w_shapes]
        biases = [rand_float(rng, (state,), dt, 0.3) for _ in _GATES]
        h, c = rand_float(rng, (batch, state), dt, 0.5), rand_float(rng, (batch, state), dt)
        return [x, *weights, *biases, h, c], attrs
    wide = rng.random() < 0.4
    adt, bdt = (np.int16, np.int64) if wide else (np.int8, np.int32)
    a_lo, a_hi = storage_range(adt)
    s_x = float(np.float32(rng.uniform(0.01, 0.05) / (256 if wide else 1)))
    zp_x = 0 if wide else int(rng.integers(-20, 21))
    s_h = float(np.float32(1 / (32768 if wide else 128)))  # the hidden state is tanh x sigmoid, in (-1, 1)
    zp_h = 0 if wide else int(rng.integers(-5, 6))
    s_c = float(2.0 ** -int(rng.integers(10, 14)))
    x = rng.integers(a_lo, a_hi + 1, x_shape).astype(adt)
    weights = [rng.integers(-127, 128, s).astype(np.int8) for s in w_shapes]
    s_ws = [float(np.float32(rng.uniform(0.004, 0.03))) for _ in w_shapes]
    biases = [rng.integers(-(2**12), 2**12, (state,)).astype(bdt) for _ in _GATES]
    h = rng.integers(a_lo, a_hi + 1, (batch, state)).astype(adt)
    c = rng.integers(-(2**14), 2**14, (batch, state)).astype(np.int16)
    q_h = QuantParams(s_h, zp_h, storage=from_numpy(np.dtype(adt)))
    q_c = QuantParams(s_c, 0, storage=DType.i16)
    in_q = [
        QuantParams(s_x, zp_x, storage=from_numpy(np.dtype(adt))),
        *(QuantParams(s, 0) for s in s_ws),
        *(QuantParams(float(np.float32(s_x * s)), 0, storage=from_numpy(np.dtype(bdt))) for s in s_ws[:4]),
        q_h,
        q_c,
    ]
    return [x, *weights, *biases, h, c], attrs, [q_h, q_h, q_c], in_q
