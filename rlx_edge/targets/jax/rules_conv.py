"""conv2d, depthwise_conv2d, fully_connected and matmul for the jax target.

Float layers use XLA's convolution and dot at ``Precision.HIGHEST`` (no
TF32 or bf16 passes on GPU/TPU). Integer layers compute the same exact
accumulators as the ops' numpy eval, whatever the product is computed in,
and end in the op family's own :func:`~rlx_edge.ir.ops.conv.finish_accumulators`
on the node's prepared parameters (``Program.quant``): nothing about the
numerics is decided here.

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

from rlx_edge.ir.ops import apply_activation, compute_dtype
from rlx_edge.ir.ops.conv import finish_accumulators, folded_bias, transpose_conv_pads
from rlx_edge.ir.prepared import Prepared
from rlx_edge.targets.jax._lazy import jnp, lax
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import out_hw, pad_nhwc, resolved_pads, taps

F32_EXACT = 2**24  # integers of magnitude <= 2**24 are exact in float32


def _highest() -> Any:
    return lax.Precision.HIGHEST


# integer product planning ----------------------------------------------------------------
def _plan(ctx: LowerCtx, w_rows: np.ndarray, x_dtype: np.dtype, zp_x: int, wide: bool, zp_w: int) -> str:
    """Pick f32 / i32 / i8 for an integer product of ``x - zp_x`` with rows ``w_rows`` (one per output)."""
    mode = ctx.options.int_matmul
    info = np.iinfo(np.dtype(x_dtype))
    lo, hi = int(info.min), int(info.max)
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


def _int_layer(ctx: LowerCtx, what: str) -> tuple[Prepared, np.ndarray, np.ndarray | None]:
    """The prepared parameters, the constant weights and the constant bias (or None) of a quantized layer."""
    if ctx.params is None:
        raise ctx.unsupported(f"quantized {what} without prepared parameters")
    w = ctx.const(1, f"{what} weight")
    b = ctx.consts[2] if len(ctx.consts) > 2 else None
    if len(ctx.in_types) > 2 and ctx.in_types[2] is not None and b is None:
        ctx.const(2, f"{what} bias")
    return ctx.params, w, b


def _float_conv(x, w, b, strides: tuple, p: tuple, dil: tuple, w_layout: str, groups: int, act: str) -> Any:
    """A float NHWC convolution by XLA (weights in ``w_layout``), plus the bias and the fused activation."""
    ct = compute_dtype(x.dtype)
    y = lax.conv_general_dilated(
        x.astype(ct),
        w.astype(ct),
        window_strides=strides,
        padding=[(p[0], p[1]), (p[2], p[3])],
        rhs_dilation=dil,
        dimension_numbers=("NHWC", w_layout, "NHWC"),
        feature_group_count=groups,
        precision=_highest(),
    )
    if b is not None:
        y = y + b.astype(ct)
    return apply_activation(y, act)


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
            return _float_conv(x, w, b, strides, p, dil, "OHWI", groups, a["activation"])

        return conv_float

    prm, w, b = _int_layer(ctx, "conv2d")
    zp_x, p = prm.in_zp, prm.pads
    og, k = o // groups, kh * kw * ig
    # weight rows in the im2col order (KH, KW, IG), one block per group
    w_rows = w.astype(np.int64).reshape(groups, og, k)
    choice = _plan(ctx, w_rows.reshape(o, k), xt.dtype.numpy, zp_x, prm.wide, 0)
    if choice == "i8":
        # raw int8 inputs padded with the zero point (so padding contributes nothing once
        # the input offset is in the bias)
        b = folded_bias(prm, w_rows.sum(axis=2).reshape(o), b)

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
        return finish_accumulators(prm, acc, b)

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
            # [1,KH,KW,C*M] is HWIO with I = 1 and one group per input channel
            return _float_conv(x, w.reshape(kh, kw, 1, cm), b, strides, p, dil, "HWIO", x.shape[-1], a["activation"])

        return dw_float

    prm, w, b = _int_layer(ctx, "depthwise_conv2d")
    zp_x, p = prm.in_zp, prm.pads
    acc_dt = np.int64 if prm.wide else np.int32
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
        return finish_accumulators(prm, acc, b)

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
            return apply_activation(y, act)

        return fc_float

    xt = ctx.in_types[0]
    prm, w, b = _int_layer(ctx, "fully_connected")
    zp_x, zp_w = prm.in_zp, prm.w_zp
    choice = _plan(ctx, w, xt.dtype.numpy, zp_x, prm.wide, zp_w)
    rows = w.astype(np.int64) - zp_w
    if choice == "i8":
        b = folded_bias(prm, rows.sum(axis=1), b)

    def fc_int(x, w_unused=None, b_unused=None):
        if choice == "i8":
            acc = _int_dot(x, rows, choice)
        else:
            lhs = x.astype(jnp.int64 if choice == "i64" else jnp.int32) - zp_x
            acc = _int_dot(lhs, rows, choice)
        return finish_accumulators(prm, acc, b)

    return fc_int


# matmul --------------------------------------------------------------------------------------
@RULES.rule("matmul")
def _matmul(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()  # TFLite's BATCH_MATMUL: int64 products, then the shared epilogue
    out_dt = ctx.out_types[0].dtype

    def mm(a, b):
        if not out_dt.is_float:  # integer matmul accumulates in int64 and wraps, as the reference
            return jnp.matmul(a.astype(jnp.int64), b.astype(jnp.int64))
        ct = compute_dtype(out_dt.numpy)
        return jnp.matmul(a.astype(ct), b.astype(ct), precision=_highest())

    return mm


# transpose_conv2d ----------------------------------------------------------------------------
def _tconv_scatter(x: Any, tap_product, kernel: tuple[int, int], strides: tuple, out_shape: tuple, pads: tuple) -> Any:
    """The op's scatter form (ir/ops/conv.py): each kernel tap's product over every input pixel
    (``tap_product(x, fy, fx)``, [N, H, W, O]) added onto the canvas of every position a tap
    reaches, then the output's rows and columns cut out (zeros where the canvas ends first)."""
    n, h, wd, _ = x.shape
    (kh, kw), (sh, sw), (pt, pl) = kernel, strides, pads
    oh, ow, o = (int(d) for d in out_shape[1:])
    canvas = None
    for fy in range(kh):
        for fx in range(kw):
            t = tap_product(x, fy, fx)
            if canvas is None:
                canvas = jnp.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, o), t.dtype)
            canvas = canvas.at[:, fy : fy + (h - 1) * sh + 1 : sh, fx : fx + (wd - 1) * sw + 1 : sw].add(t)
    extra_h, extra_w = max(0, pt + oh - canvas.shape[1]), max(0, pl + ow - canvas.shape[2])
    if extra_h or extra_w:
        canvas = jnp.pad(canvas, ((0, 0), (0, extra_h), (0, extra_w), (0, 0)))
    return canvas[:, pt : pt + oh, pl : pl + ow]


@RULES.rule("transpose_conv2d")
def _transpose_conv2d(ctx: LowerCtx):
    a = ctx.attrs
    wt = ctx.in_types[1]
    o, kh, kw, _ = (int(d) for d in wt.shape)
    out_shape, strides = a["output_shape"], a["strides"]
    if not ctx.quantized:
        pads = transpose_conv_pads((int(out_shape[1]), int(out_shape[2])), (kh, kw), strides, a["padding"])

        def tconv_float(x, w, b=None):
            ct = compute_dtype(x.dtype)
            xc, wc = x.astype(ct), w.astype(ct)

            def tap(xv, fy, fx):
                return jnp.matmul(xv, wc[:, fy, fx, :].T, precision=_highest())

            y = _tconv_scatter(xc, tap, (kh, kw), strides, out_shape, pads)
            if b is not None:
                y = y + b.astype(ct)
            return apply_activation(y, a["activation"])

        return tconv_float

    xt = ctx.in_types[0]
    prm, w, b = _int_layer(ctx, "transpose_conv2d")
    zp_x, pads = prm.in_zp, tuple(prm.tpads)
    rows = w.astype(np.int64)  # [O, KH, KW, I]
    choice = _plan(ctx, rows.reshape(o, -1), xt.dtype.numpy, zp_x, prm.wide, 0)
    if choice == "i8":  # raw int8 inputs would need a bias per output pixel (how many taps reach it)
        choice = ctx.notes["int_matmul"] = "i32"

    def tconv_int(x, w_unused=None, b_unused=None):
        xs = x.astype(jnp.int64 if choice == "i64" else jnp.int32) - zp_x

        def tap(xv, fy, fx):
            return _int_dot(xv, rows[:, fy, fx, :], choice)

        return finish_accumulators(prm, _tconv_scatter(xs, tap, (kh, kw), strides, out_shape, pads), b)

    return tconv_int
