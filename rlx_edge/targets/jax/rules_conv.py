"""conv2d, depthwise_conv2d, fully_connected and matmul for the jax target.

Float layers use XLA's convolution and dot at ``Precision.HIGHEST`` (no
TF32 or bf16 passes on GPU/TPU). Integer layers reproduce
``rlx_edge.quant.intkernels`` exactly: the accumulator of every output is
the same integer, whatever the product is computed in, and requantization
is the mirrored fixed-point code.

Exact integer products. A sum of integer products is exact in float32 as
long as every partial sum stays below 2**24 in magnitude, whatever order
the hardware adds in (all partial sums are then integers float32 holds
exactly). Lowering bounds each output channel's partial sums by
``sum_k |w[c, k]| * max |x - zp_x|`` with the real weights and takes the
float32 GEMM (fast everywhere) only where the bound holds. Convolutions are
lowered as explicit im2col + GEMM rather than XLA convolutions, because
convolution libraries may pick Winograd or FFT algorithms, which are not
exact on integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.quant import intkernels
from rlx_edge.targets.jax._lazy import jnp, lax
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import (
    act_range,
    activation,
    clamp_cast,
    compute_dtype,
    out_hw,
    pad_nhwc,
    requantize_acc,
    resolved_pads,
    storage_range,
    taps,
)

F32_EXACT = 2**24  # integers of magnitude <= 2**24 are exact in float32


def _highest() -> Any:
    return lax.Precision.HIGHEST


# integer product planning ----------------------------------------------------------------
def _plan(ctx: LowerCtx, w_rows: np.ndarray, x_dtype: np.dtype, zp_x: int, wide: bool, zp_w: int) -> str:
    """Pick f32 / i32 / i8 for an integer product of ``x - zp_x`` with rows ``w_rows`` (one per output)."""
    mode = ctx.options.int_matmul
    lo, hi = storage_range(x_dtype)
    x_max = max(hi - zp_x, zp_x - lo)
    bound = int(np.abs(w_rows.astype(np.int64) - zp_w).sum(axis=1).max(initial=0)) * x_max
    exact_f32 = bound < F32_EXACT
    ctx.notes["f32_bound"] = bound
    if wide:  # 16x8 with int64 bias: accumulators are 64-bit, int32 products could wrap
        choice = "f32" if exact_f32 and mode in ("auto", "f32") else "i64"
    elif mode == "i8":
        int8_ok = np.dtype(x_dtype) == np.int8 and zp_w == 0 and lo <= zp_x <= hi
        choice = "i8" if int8_ok else "i32"
    elif mode == "f32":
        if not exact_f32:
            raise ctx.unsupported(
                f"int_matmul='f32' here: partial sums can reach {bound} >= 2**24, not exact in float32;"
                " use int_matmul='auto' or 'i32'"
            )
        choice = "f32"
    elif mode == "i32":
        choice = "i32"
    else:
        choice = "f32" if exact_f32 else "i32"
    ctx.notes["int_matmul"] = choice
    return choice


def _int_dot(lhs: Any, rhs: np.ndarray, choice: str) -> Any:
    """``lhs @ rhs.T`` over the last axes, exactly, as int32 (int64 for 'i64')."""
    dims = (((lhs.ndim - 1,), (1,)), ((), ()))
    if choice == "f32":
        out = lax.dot_general(lhs.astype(jnp.float32), jnp.asarray(rhs, jnp.float32), dims, precision=_highest())
        return out.astype(jnp.int32)
    if choice == "i8":
        return lax.dot_general(lhs.astype(jnp.int8), jnp.asarray(rhs, jnp.int8), dims, preferred_element_type=jnp.int32)
    acc = jnp.int64 if choice == "i64" else jnp.int32
    return lax.dot_general(lhs.astype(acc), jnp.asarray(rhs, acc), dims, preferred_element_type=acc)


def _bias(b: np.ndarray | None) -> tuple[np.ndarray | int, bool]:
    if b is None:
        return 0, False
    return b, b.dtype == np.int64


def _epilogue(ctx: LowerCtx, acc: Any, bias: Any, wide: bool, mult, shift, lo: int, hi: int, out_dt) -> Any:
    _, zp_y = intkernels.scalar_params(ctx.out_types[0].quant, f"{ctx.node.op} output")
    if wide:
        acc = acc.astype(jnp.int64) + jnp.asarray(bias, jnp.int64)
    else:
        acc = acc.astype(jnp.int32) + jnp.asarray(bias, jnp.int32)  # int32 wraps as wrap_int32 does
    return clamp_cast(requantize_acc(acc, mult, shift, wide) + zp_y, lo, hi, out_dt)


# conv2d -------------------------------------------------------------------------------------
@RULES.rule("conv2d")
def _conv2d(ctx: LowerCtx):
    a = ctx.attrs
    xt, wt = ctx.in_types[0], ctx.in_types[1]
    o, kh, kw, ig = (int(d) for d in wt.shape)
    groups, strides, dil = a["groups"], a["strides"], a["dilations"]
    p = resolved_pads(xt, kh, kw, strides, dil, a["padding"], a["pads"])
    if not ctx.quantized:

        def conv_float(x, w, b=None):
            ct = compute_dtype(x.dtype)
            y = lax.conv_general_dilated(
                x.astype(ct),
                w.astype(ct),
                window_strides=strides,
                padding=[(p[0], p[1]), (p[2], p[3])],
                rhs_dilation=dil,
                dimension_numbers=("NHWC", "OHWI", "NHWC"),
                feature_group_count=groups,
                precision=_highest(),
            )
            if b is not None:
                y = y + b.astype(ct)
            return activation(y, a["activation"])

        return conv_float

    w = ctx.const(1, "conv2d weight")
    b = ctx.consts[2] if len(ctx.consts) > 2 else None
    if len(ctx.in_types) > 2 and ctx.in_types[2] is not None and b is None:
        ctx.const(2, "conv2d bias")
    x_q, y_q = xt.quant, ctx.out_types[0].quant
    s_x, zp_x = intkernels.scalar_params(x_q, "conv2d input")
    s_y, _ = intkernels.scalar_params(y_q, "conv2d output")
    out_dt = ctx.out_types[0].dtype.numpy
    mult, shift = intkernels._conv_multipliers(s_x, ctx.in_types[1].quant.scale, s_y, o)
    lo, hi = act_range(a["activation"], y_q, out_dt)
    bias, wide = _bias(b)
    og, k = o // groups, kh * kw * ig
    # weight rows in the im2col order (KH, KW, IG), one block per group
    w_rows = w.astype(np.int64).reshape(groups, og, k)
    choice = _plan(ctx, w_rows.reshape(o, k), xt.dtype.numpy, zp_x, wide, 0)
    if choice == "i8":
        # raw int8 inputs padded with the zero point (so padding contributes nothing after the
        # correction), minus zp_x * sum(w) per output channel
        correction = zp_x * w_rows.sum(axis=2).reshape(o)

    def conv_int(x, w_unused=None, b_unused=None):
        if choice == "i8":
            xp = pad_nhwc(x, p, zp_x)
        else:
            xs = x.astype(jnp.int64 if choice == "i64" else jnp.int32) - zp_x
            xp = pad_nhwc(xs.astype(jnp.float32) if choice == "f32" else xs, p, 0)
        oh, ow = out_hw(xp.shape, kh, kw, strides, dil)
        n = xp.shape[0]
        cols = jnp.stack(taps(xp, kh, kw, strides, dil, oh, ow), axis=3)  # N,OH,OW,KH*KW,C
        cols = cols.reshape(n, oh, ow, kh * kw, groups, ig)
        parts = []
        for g in range(groups):
            lhs = cols[:, :, :, :, g, :].reshape(n, oh, ow, k)
            parts.append(_int_dot(lhs, w_rows[g], choice))
        acc = parts[0] if groups == 1 else jnp.concatenate(parts, axis=-1)
        if choice == "i8":
            acc = acc - jnp.asarray(correction, jnp.int32)
        return _epilogue(ctx, acc, bias, wide, mult, shift, lo, hi, out_dt)

    return conv_int


# depthwise_conv2d ---------------------------------------------------------------------------
@RULES.rule("depthwise_conv2d")
def _depthwise(ctx: LowerCtx):
    a = ctx.attrs
    xt, wt = ctx.in_types[0], ctx.in_types[1]
    _, kh, kw, cm = (int(d) for d in wt.shape)
    m, strides, dil = a["depth_multiplier"], a["strides"], a["dilations"]
    p = resolved_pads(xt, kh, kw, strides, dil, a["padding"], a["pads"])
    if not ctx.quantized:

        def dw_float(x, w, b=None):
            ct = compute_dtype(x.dtype)
            c = x.shape[-1]
            # [1,KH,KW,C*M] is HWIO with I = 1 and one group per input channel
            y = lax.conv_general_dilated(
                x.astype(ct),
                w.astype(ct).reshape(kh, kw, 1, cm),
                window_strides=strides,
                padding=[(p[0], p[1]), (p[2], p[3])],
                rhs_dilation=dil,
                dimension_numbers=("NHWC", "HWIO", "NHWC"),
                feature_group_count=c,
                precision=_highest(),
            )
            if b is not None:
                y = y + b.astype(ct)
            return activation(y, a["activation"])

        return dw_float

    w = ctx.const(1, "depthwise_conv2d weight")
    b = ctx.consts[2] if len(ctx.consts) > 2 else None
    if len(ctx.in_types) > 2 and ctx.in_types[2] is not None and b is None:
        ctx.const(2, "depthwise_conv2d bias")
    y_q = ctx.out_types[0].quant
    s_x, zp_x = intkernels.scalar_params(xt.quant, "depthwise_conv2d input")
    s_y, _ = intkernels.scalar_params(y_q, "depthwise_conv2d output")
    out_dt = ctx.out_types[0].dtype.numpy
    mult, shift = intkernels._conv_multipliers(s_x, wt.quant.scale, s_y, cm)
    lo, hi = act_range(a["activation"], y_q, out_dt)
    bias, wide = _bias(b)
    acc_dt = np.int64 if wide else np.int32
    wk = w.astype(acc_dt)[0]  # KH,KW,C*M
    # KH*KW products per output: small integer sums, exact in int32 elementwise (no GEMM needed)
    ctx.notes["int_matmul"] = "elementwise"

    def dw_int(x, w_unused=None, b_unused=None):
        xp = pad_nhwc(x.astype(acc_dt) - zp_x, p, 0)
        oh, ow = out_hw(xp.shape, kh, kw, strides, dil)
        acc = None
        for idx, t in enumerate(taps(xp, kh, kw, strides, dil, oh, ow)):
            if m != 1:
                t = jnp.repeat(t, m, axis=-1)
            term = t * wk[idx // kw, idx % kw]
            acc = term if acc is None else acc + term
        return _epilogue(ctx, acc, bias, wide, mult, shift, lo, hi, out_dt)

    return dw_int


# fully_connected -----------------------------------------------------------------------------
@RULES.rule("fully_connected")
def _fully_connected(ctx: LowerCtx):
    act = ctx.attrs["activation"]
    if not ctx.quantized:

        def fc_float(x, w, b=None):
            ct = compute_dtype(x.dtype)
            y = jnp.matmul(x.astype(ct), w.astype(ct).T, precision=_highest())
            if b is not None:
                y = y + b.astype(ct)
            return activation(y, act)

        return fc_float

    xt, wt = ctx.in_types[0], ctx.in_types[1]
    w = ctx.const(1, "fully_connected weight")
    b = ctx.consts[2] if len(ctx.consts) > 2 else None
    if len(ctx.in_types) > 2 and ctx.in_types[2] is not None and b is None:
        ctx.const(2, "fully_connected bias")
    y_q = ctx.out_types[0].quant
    s_x, zp_x = intkernels.scalar_params(xt.quant, "fully_connected input")
    s_y, _ = intkernels.scalar_params(y_q, "fully_connected output")
    zp_w = int(wt.quant.zero_point[0]) if wt.quant.scale.size == 1 else 0
    out_dt = ctx.out_types[0].dtype.numpy
    mult, shift = intkernels._conv_multipliers(s_x, wt.quant.scale, s_y, int(w.shape[0]))
    lo, hi = act_range(act, y_q, out_dt)
    bias, wide = _bias(b)
    choice = _plan(ctx, w, xt.dtype.numpy, zp_x, wide, zp_w)
    rows = w.astype(np.int64) - zp_w
    correction = zp_x * rows.sum(axis=1)

    def fc_int(x, w_unused=None, b_unused=None):
        if choice == "i8":
            acc = _int_dot(x, rows, choice) - jnp.asarray(correction, jnp.int32)
        else:
            lhs = x.astype(jnp.int64 if choice == "i64" else jnp.int32) - zp_x
            acc = _int_dot(lhs, rows, choice)
        return _epilogue(ctx, acc, bias, wide, mult, shift, lo, hi, out_dt)

    return fc_int


# matmul --------------------------------------------------------------------------------------
@RULES.rule("matmul")
def _matmul(ctx: LowerCtx):
    if ctx.quantized:
        raise ctx.unsupported("quantized matmul (the op has no integer reference)")
    out_dt = ctx.out_types[0].dtype

    def mm(a, b):
        if not out_dt.is_float:  # integer matmul accumulates in int64 and wraps, as the reference
            return jnp.matmul(a.astype(jnp.int64), b.astype(jnp.int64))
        ct = compute_dtype(out_dt.numpy)
        return jnp.matmul(a.astype(ct), b.astype(ct), precision=_highest())

    return mm
