"""Integer kernels of the reference: TFLite Micro's reference-kernel semantics in numpy.

The op families (``rlx_edge/ir/ops/*.py``) register these as their integer
references; keeping the arithmetic here, next to :mod:`rlx_edge.quant.fixedpoint`,
lets the C emitter and the FPGA generator derive from the same code, and
keeps every multiplier computation in one place.

Conventions: activations are NHWC; arrays of any leading batch size work
(nothing here depends on a static batch of 1). Scales are the float32 values
stored in the model; every multiplier is computed from them in double
precision in the order TFLite's ``Prepare`` functions use, because a
different order can change the last bit of a multiplier. Accumulators are
exact: int8 x int8 products summed in float64 are exact integers (well below
2**53), so convolutions run as BLAS matrix products and are then converted
back to int64.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.types import QuantParams
from rlx_edge.quant import fixedpoint as fp

# helpers ---------------------------------------------------------------------------


def scalar_params(q: QuantParams | None, what: str) -> tuple[float, int]:
    """The (scale, zero point) of a per-tensor quantized tensor."""
    if q is None:
        raise ValueError(f"{what} has no quantization parameters")
    if q.scale.size != 1:
        raise ValueError(f"{what} must be quantized per tensor, it has {q.scale.size} scales")
    return float(q.scale[0]), int(q.zero_point[0])


def storage_range(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def clamp_cast(v: np.ndarray, lo: int, hi: int, dtype: np.dtype) -> np.ndarray:
    return np.clip(v, lo, hi).astype(dtype)


def _exact_int(y: np.ndarray) -> np.ndarray:
    """float64 sums of integer products back to int64 (they are exact integers)."""
    return np.rint(y).astype(np.int64)


def _conv_multipliers(in_scale: float, w_scales: np.ndarray, out_scale: float, n: int) -> tuple[np.ndarray, ...]:
    """Per-output-channel (multiplier, shift) as TFLite's PopulateConvolutionQuantizationParams.

    effective = double(s_in) * double(s_w[c]) / double(s_out); a per-tensor
    weight scale is broadcast to every channel.
    """
    ws = np.asarray(w_scales, dtype=np.float32).reshape(-1)
    if ws.size == 1:
        ws = np.repeat(ws, n)
    if ws.size != n:
        raise ValueError(f"{ws.size} weight scales for {n} output channels")
    eff = [float(in_scale) * float(s) / float(out_scale) for s in ws]
    return fp.quantize_multiplier_array(np.array(eff, dtype=np.float64))


def _requantize_acc(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray, wide: bool) -> np.ndarray:
    """Accumulators to the output scale: int32 double rounding, or TFLite's int64 form (16x8 with int64 bias)."""
    if wide:
        return fp.multiply_by_quantized_multiplier_int64(acc, mult, shift)
    return fp.multiply_by_quantized_multiplier(fp.wrap_int32(acc), mult, shift)


def _finish(acc, mult, shift, wide, out_zp, act_lo, act_hi, dtype) -> np.ndarray:
    y = _requantize_acc(acc, mult, shift, wide) + out_zp
    return clamp_cast(y, act_lo, act_hi, dtype)


def _act_range(activation: str, out_q: QuantParams, dtype: np.dtype) -> tuple[int, int]:
    s, zp = scalar_params(out_q, "output")
    lo, hi = storage_range(dtype)
    return fp.activation_range(activation, s, zp, lo, hi)


def _pad_nhwc(x: np.ndarray, pads: tuple[int, int, int, int], value: int = 0) -> np.ndarray:
    pt, pb, pl, pr = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=value)


def _tap(xp: np.ndarray, i: int, j: int, oh: int, ow: int, strides, dilations) -> np.ndarray:
    """The input pixels that kernel tap (i, j) meets for every output position: (N, OH, OW, C)."""
    r0, c0 = i * dilations[0], j * dilations[1]
    return xp[:, r0 : r0 + (oh - 1) * strides[0] + 1 : strides[0], c0 : c0 + (ow - 1) * strides[1] + 1 : strides[1], :]


def _bias_and_width(b: np.ndarray | None, x_dtype: np.dtype) -> tuple[np.ndarray | int, bool]:
    """The bias as int64 and whether accumulators are 64-bit (int64 bias, TFLite's 16x8 scheme)."""
    if b is None:
        return 0, False
    return b.astype(np.int64), b.dtype == np.int64


# convolutions --------------------------------------------------------------------------
def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    x_q: QuantParams,
    w_q: QuantParams,
    y_q: QuantParams,
    out_dtype: np.dtype,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    pads: tuple[int, int, int, int],
    groups: int,
    activation: str,
) -> np.ndarray:
    """TFLite's ConvPerChannel (int8, or int16 activations with int8 weights).

    acc[c] = sum (x - zp_x) * w[c] + bias[c]; padded taps contribute nothing
    (as TFLite skips them); weight zero points are 0 by the spec.
    """
    s_x, zp_x = scalar_params(x_q, "conv2d input")
    s_y, zp_y = scalar_params(y_q, "conv2d output")
    o, kh, kw, ig = w.shape
    n = x.shape[0]
    xp = _pad_nhwc(x.astype(np.float64) - zp_x, pads)
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[1] - eh) // strides[0] + 1
    ow = (xp.shape[2] - ew) // strides[1] + 1
    # im2col in (KH, KW, C) order so that the weight matrix is w.reshape(O, -1)
    cols = np.stack([_tap(xp, i, j, oh, ow, strides, dilations) for i in range(kh) for j in range(kw)], axis=3)
    cols = cols.reshape(n * oh * ow, kh * kw, groups, ig)
    wf = w.astype(np.float64).reshape(groups, o // groups, kh * kw, ig)
    acc = np.empty((n * oh * ow, o), dtype=np.int64)
    og = o // groups
    for g in range(groups):
        lhs = cols[:, :, g, :].reshape(n * oh * ow, kh * kw * ig)
        acc[:, g * og : (g + 1) * og] = _exact_int(lhs @ wf[g].reshape(og, kh * kw * ig).T)
    bias, wide = _bias_and_width(b, x.dtype)
    acc = acc.reshape(n, oh, ow, o) + bias
    mult, shift = _conv_multipliers(s_x, w_q.scale, s_y, o)
    lo, hi = _act_range(activation, y_q, out_dtype)
    return _finish(acc, mult, shift, wide, zp_y, lo, hi, out_dtype)


def depthwise_conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    x_q: QuantParams,
    w_q: QuantParams,
    y_q: QuantParams,
    out_dtype: np.dtype,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    pads: tuple[int, int, int, int],
    depth_multiplier: int,
    activation: str,
) -> np.ndarray:
    """TFLite's DepthwiseConvPerChannel: output channel c*M + m reads input channel c."""
    s_x, zp_x = scalar_params(x_q, "depthwise_conv2d input")
    s_y, zp_y = scalar_params(y_q, "depthwise_conv2d output")
    _, kh, kw, cm = w.shape
    xp = _pad_nhwc(x.astype(np.int64) - zp_x, pads)
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[1] - eh) // strides[0] + 1
    ow = (xp.shape[2] - ew) // strides[1] + 1
    wk = w.astype(np.int64)[0]
    acc = np.zeros((x.shape[0], oh, ow, cm), dtype=np.int64)
    for i in range(kh):
        for j in range(kw):
            t = _tap(xp, i, j, oh, ow, strides, dilations)
            if depth_multiplier != 1:
                t = np.repeat(t, depth_multiplier, axis=-1)
            acc += t * wk[i, j]
    bias, wide = _bias_and_width(b, x.dtype)
    acc = acc + bias
    mult, shift = _conv_multipliers(s_x, w_q.scale, s_y, cm)
    lo, hi = _act_range(activation, y_q, out_dtype)
    return _finish(acc, mult, shift, wide, zp_y, lo, hi, out_dtype)


def fully_connected(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    x_q: QuantParams,
    w_q: QuantParams,
    y_q: QuantParams,
    out_dtype: np.dtype,
    activation: str,
) -> np.ndarray:
    """TFLite's FullyConnected / FullyConnectedPerChannel.

    acc = sum (x - zp_x) * (w - zp_w) + bias (the per-tensor kernel honours a
    weight zero point; per-channel weights are symmetric).
    """
    s_x, zp_x = scalar_params(x_q, "fully_connected input")
    s_y, zp_y = scalar_params(y_q, "fully_connected output")
    zp_w = int(w_q.zero_point[0]) if w_q.scale.size == 1 else 0
    lhs = x.astype(np.float64) - zp_x
    rhs = w.astype(np.float64) - zp_w
    acc = _exact_int(lhs @ rhs.T)
    bias, wide = _bias_and_width(b, x.dtype)
    acc = acc + bias
    mult, shift = _conv_multipliers(s_x, w_q.scale, s_y, w.shape[0])
    lo, hi = _act_range(activation, y_q, out_dtype)
    return _finish(acc, mult, shift, wide, zp_y, lo, hi, out_dtype)


# elementwise --------------------------------------------------------------------------------
def add_sub(
    a: np.ndarray,
    b: np.ndarray,
    *,
    a_q: QuantParams,
    b_q: QuantParams,
    y_q: QuantParams,
    out_dtype: np.dtype,
    activation: str,
    subtract: bool,
) -> np.ndarray:
    """TFLite's quantized Add / Sub: both inputs rescaled onto twice the larger input scale.

    Inputs are offset, shifted left by 20 bits (15 for int16 outputs) for
    headroom, each multiplied by its Q31 multiplier (< 1), summed, and the
    sum multiplied down to the output scale; every multiply rounds twice.
    """
    s1, zp1 = scalar_params(a_q, "first input")
    s2, zp2 = scalar_params(b_q, "second input")
    s_y, zp_y = scalar_params(y_q, "output")
    left_shift = 15 if np.dtype(out_dtype) == np.int16 else 20
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(float(s1) / twice_max)
    m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(float(s2) / twice_max)
    mo, eo = fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << left_shift) * float(s_y)))
    v1 = fp.wrap_int32((a.astype(np.int64) - zp1) << left_shift)
    v2 = fp.wrap_int32((b.astype(np.int64) - zp2) << left_shift)
    sv1 = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(v1, m1, e1)
    sv2 = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(v2, m2, e2)
    raw = fp.wrap_int32(sv1 - sv2 if subtract else sv1 + sv2)
    y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(raw, mo, eo) + zp_y
    lo, hi = _act_range(activation, y_q, out_dtype)
    return clamp_cast(y, lo, hi, out_dtype)


def mul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    a_q: QuantParams,
    b_q: QuantParams,
    y_q: QuantParams,
    out_dtype: np.dtype,
    activation: str,
) -> np.ndarray:
    """TFLite's quantized Mul: (a - zp_a) * (b - zp_b) times one multiplier s_a * s_b / s_y."""
    s1, zp1 = scalar_params(a_q, "first input")
    s2, zp2 = scalar_params(b_q, "second input")
    s_y, zp_y = scalar_params(y_q, "output")
    m, e = fp.quantize_multiplier(float(s1) * float(s2) / float(s_y))
    prod = fp.wrap_int32((a.astype(np.int64) - zp1) * (b.astype(np.int64) - zp2))
    y = fp.multiply_by_quantized_multiplier(prod, m, e) + zp_y
    lo, hi = _act_range(activation, y_q, out_dtype)
    return clamp_cast(y, lo, hi, out_dtype)


# pooling -------------------------------------------------------------------------------------
def _pool_windows(x: np.ndarray, kernel, strides, pads, fill) -> tuple[np.ndarray, np.ndarray]:
    """Windows (N, OH, OW, C, KH*KW) over padded x, and a validity mask (OH, OW, KH*KW)."""
    kh, kw = kernel
    xp = _pad_nhwc(x, pads, fill)
    oh = (xp.shape[1] - kh) // strides[0] + 1
    ow = (xp.shape[2] - kw) // strides[1] + 1
    taps = [_tap(xp, i, j, oh, ow, strides, (1, 1)) for i in range(kh) for j in range(kw)]
    win = np.stack(taps, axis=-1)
    valid = np.ones((1, x.shape[1], x.shape[2], 1), dtype=np.int64)
    vp = _pad_nhwc(valid, pads, 0)
    mask = np.stack([_tap(vp, i, j, oh, ow, strides, (1, 1)) for i in range(kh) for j in range(kw)], axis=-1)
    return win, mask[0, :, :, 0, :].astype(bool)


def avg_pool2d(x, *, y_q: QuantParams, out_dtype, kernel, strides, pads, activation) -> np.ndarray:
    """TFLite's quantized AveragePool: integer sum over the real (unpadded) taps / count, rounded half away.

    Input and output share quantization parameters (TFLite requires it), so
    no rescaling happens; the division is C's truncating division after
    adding or subtracting half the count.
    """
    win, mask = _pool_windows(x.astype(np.int64), kernel, strides, pads, 0)
    acc = win.sum(axis=-1)  # padded taps hold 0
    count = mask.sum(axis=-1).astype(np.int64)[None, :, :, None]
    half = count // 2
    num = np.where(acc > 0, acc + half, acc - half)
    q = np.where(num >= 0, num // count, -((-num) // count))
    lo, hi = _act_range(activation, y_q, out_dtype)
    return clamp_cast(q, lo, hi, out_dtype)


def max_pool2d(x, *, y_q: QuantParams, out_dtype, kernel, strides, pads, activation) -> np.ndarray:
    """TFLite's quantized MaxPool: max over the real taps, clamped to the activation range."""
    lo_t, _ = storage_range(x.dtype)
    win, _ = _pool_windows(x.astype(np.int64), kernel, strides, pads, lo_t - 1)
    q = win.max(axis=-1)
    lo, hi = _act_range(activation, y_q, out_dtype)
    return clamp_cast(q, lo, hi, out_dtype)


# softmax ----------------------------------------------------------------------------------------
_SCALED_DIFF_INTEGER_BITS = 5
_ACCUMULATION_INTEGER_BITS = 12


def softmax_int8(x: np.ndarray, *, x_q: QuantParams, beta: float, out_dtype: np.dtype) -> np.ndarray:
    """TFLite's int8 Softmax (int8 or int16 output) along the last axis, gemmlowp fixed point.

    Differences to the row maximum are scaled by beta*s_x into Q5.26,
    exponentiated, summed in Q12.19, and each exp multiplied by the
    reciprocal of the sum; differences below ``diff_min`` contribute 0.
    The output is [0, 1) on 2**-8 (int8, zero point -128) or 2**-16 /
    zero point -32768 (int16) steps, as the kernel assumes.
    """
    s_x, _ = scalar_params(x_q, "softmax input")
    mult, left_shift = fp.preprocess_softmax_scaling(beta, s_x, _SCALED_DIFF_INTEGER_BITS)
    diff_min = -fp.calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)
    xi = x.astype(np.int64)
    diff = xi - xi.max(axis=-1, keepdims=True)
    use = diff >= diff_min
    rescaled = fp.multiply_by_quantized_multiplier_greater_than_one(diff, mult, left_shift)
    exps = fp.exp_on_negative_values(rescaled, _SCALED_DIFF_INTEGER_BITS)
    acc_terms = fp.rounding_divide_by_pot(exps, _ACCUMULATION_INTEGER_BITS)  # Q0.31 -> Q12.19
    sum_of_exps = np.where(use, acc_terms, 0).sum(axis=-1, keepdims=True)
    shifted_scale, bits_over_unit = fp.get_reciprocal(sum_of_exps, _ACCUMULATION_INTEGER_BITS)
    out_bits = np.dtype(out_dtype).itemsize * 8
    lo, hi = storage_range(out_dtype)
    unsat = fp.rounding_divide_by_pot(
        fp.saturating_rounding_doubling_high_mul(shifted_scale, exps), bits_over_unit + 31 - out_bits
    )
    y = np.clip(unsat + lo, lo, hi)
    return np.where(use, y, lo).astype(out_dtype)


_EXP_LUT: np.ndarray | None = None
_RECIP_LUT: np.ndarray | None = None


def _softmax_luts() -> tuple[np.ndarray, np.ndarray]:
    global _EXP_LUT, _RECIP_LUT
    if _EXP_LUT is None or _RECIP_LUT is None:
        # exp on [-10, 0] (exp(-10) no longer matters to the sum), 1/(1+x) on [0, 1]
        _EXP_LUT = fp.gen_lut_int16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0)
        _RECIP_LUT = fp.gen_lut_int16(lambda v: np.float32(1) / (np.float32(1) + v), 0.0, 1.0)
    return _EXP_LUT, _RECIP_LUT


def softmax_int16(x: np.ndarray, *, x_q: QuantParams, beta: float) -> np.ndarray:
    """TFLite's int16 Softmax (SoftmaxInt16) along the last axis: table lookups for exp and 1/(1+x).

    Differences are rescaled so that [-10, 0] spans [-65535, 0], recentred
    into int16 for the exp table (Q0.15 results), summed, normalized by the
    count of leading zeros and inverted through the 1/(1+x) table.
    """
    s_x, _ = scalar_params(x_q, "softmax input")
    exp_lut, recip_lut = _softmax_luts()
    mult, shift = fp.quantize_multiplier(float(np.float32(s_x) * np.float32(beta)) / (10.0 / 65535.0))
    xi = x.astype(np.int64)
    diff = xi - xi.max(axis=-1, keepdims=True)
    scaled = fp.multiply_by_quantized_multiplier(diff, mult, shift)
    sym = np.clip(scaled + 32767, fp.INT16_MIN, fp.INT16_MAX)
    exps = fp.int16_table_lookup(sym, exp_lut)
    total = exps.sum(axis=-1, keepdims=True)
    headroom_plus_one = fp.count_leading_zeros_u32(total)
    shifted_sum = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
    sym_sum = np.clip(shifted_sum - ((1 << 15) + (1 << 16)), fp.INT16_MIN, fp.INT16_MAX)
    recip = fp.int16_table_lookup(sym_sum, recip_lut)
    right_shift = 31 - headroom_plus_one
    rnd = np.int64(1) << (right_shift - 1)
    y = (exps * recip + rnd) >> right_shift
    return np.clip(y, 0, fp.INT16_MAX).astype(np.int16)


# logistic / tanh --------------------------------------------------------------------------------
_INPUT_INTEGER_BITS = 4


def _sigmoid_tanh_scaling(s_x: float) -> tuple[int, int, int]:
    """Input multiplier, shift and range radius of TFLite's int8 logistic/tanh Prepare.

    The multiplier comes from frexp without QuantizeMultiplier's carry
    handling, exactly as the kernels compute it.
    """
    real = float(s_x) * float(1 << (31 - _INPUT_INTEGER_BITS))
    mant, shift = np.frexp(real)
    m = int(fp._round_half_away_exact(float(mant) * 2.0**31))
    m = int(fp.wrap_int32(m))
    radius = fp.calculate_input_radius(_INPUT_INTEGER_BITS, int(shift), 31)
    return m, int(shift), radius


def sigmoid_int8(x: np.ndarray, *, x_q: QuantParams) -> np.ndarray:
    """TFLite's int8 Logistic: gemmlowp logistic of the input in Q4.27; output scale 1/256, zero point -128."""
    s_x, zp_x = scalar_params(x_q, "sigmoid input")
    m, shift, radius = _sigmoid_tanh_scaling(s_x)
    v = x.astype(np.int64) - zp_x
    q4 = fp.multiply_by_quantized_multiplier(v, m, shift)
    out = fp.rounding_divide_by_pot(fp.logistic_fixed(q4, _INPUT_INTEGER_BITS), 31 - 8)
    out = np.clip(out - 128, -128, 127)
    out = np.where(v <= -radius, -128, np.where(v >= radius, 127, out))
    return out.astype(np.int8)


def tanh_int8(x: np.ndarray, *, x_q: QuantParams) -> np.ndarray:
    """TFLite's int8 Tanh: gemmlowp tanh of the input in Q4.27; output scale 1/128, zero point 0."""
    s_x, zp_x = scalar_params(x_q, "tanh input")
    m, shift, radius = _sigmoid_tanh_scaling(s_x)
    v = x.astype(np.int64) - zp_x
    q4 = fp.multiply_by_quantized_multiplier(v, m, shift)
    out = fp.rounding_divide_by_pot(fp.tanh_fixed(q4, _INPUT_INTEGER_BITS), 31 - 7)
    out = np.clip(out, -128, 127)
    out = np.where(v <= -radius, -128, np.where(v >= radius, 127, out))
    return out.astype(np.int8)


# hard swish ----------------------------------------------------------------------------------------
def hard_swish_int8(x: np.ndarray, *, x_q: QuantParams, y_q: QuantParams, out_dtype) -> np.ndarray:
    """TFLite's quantized HardSwish: x * relu6(x + 3) / 6 in 16-bit fixed point.

    The input moves to a "hi-res" scale (x 2**7); one Q15 multiplier takes it
    to the output scale, another maps [-3, 3] onto the int16 range for the
    relu-ish factor in [0, 1]; their product is a truncating doubling high
    multiply (no rounding, which cancels the bias of the earlier roundings).
    """
    s_x, zp_x = scalar_params(x_q, "hard_swish input")
    s_y, zp_y = scalar_params(y_q, "hard_swish output")
    f32 = np.float32
    hires_scale = f32(1.0 / 128.0) * f32(s_x)
    out_m32, out_e = fp.quantize_multiplier(float(hires_scale / f32(s_y)))
    out_m16 = fp.down_scale_int32_to_int16_multiplier(out_m32)
    rel_m32, rel_e = fp.quantize_multiplier(float(hires_scale / (f32(3.0) / f32(32768.0))))
    rel_m16 = fp.down_scale_int32_to_int16_multiplier(rel_m32)
    if out_e > 0:
        raise ValueError("hard_swish: output multiplier must not exceed 1 (TFLite requires it)")
    v = x.astype(np.int64) - zp_x
    hires = fp.wrap_int32(v << 7)
    hires = ((hires + 2**15) & 0xFFFF) - 2**15  # int16 storage as in the kernel
    pre_out = fp.saturating_rounding_doubling_high_mul_int16(hires, out_m16)
    rel = hires
    if rel_e > 0:
        rel = fp.saturating_left_shift_int16(rel, rel_e - 1)
    rel = fp.saturating_rounding_doubling_high_mul_int16(rel, rel_m16)
    if rel_e > 0:
        rel = fp.saturating_left_shift_int16(rel, 1)
    if rel_e < 0:
        rel = fp.rounding_divide_by_pot(rel, -rel_e)
    rel = (rel + (1 << 15)) >> 1
    pre = fp.saturating_doubling_high_mul_int16(rel, pre_out)
    y = fp.rounding_divide_by_pot(pre, -out_e) + zp_y
    lo, hi = storage_range(out_dtype)
    return clamp_cast(y, lo, hi, out_dtype)


# rescaling and clamps ---------------------------------------------------------------------------
def _channel_params(q: QuantParams, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Scales (float32) and zero points (int64) shaped to broadcast against an array of ``shape``."""
    if q.axis is None or q.scale.size == 1:
        return q.scale.reshape(()), q.zero_point.reshape(())
    bshape = [1] * len(shape)
    bshape[q.axis % len(shape)] = -1
    return q.scale.reshape(bshape), q.zero_point.reshape(bshape)


def requantize(
    x: np.ndarray, *, x_q: QuantParams, y_q: QuantParams, out_dtype, out_range: tuple[int, int] | None = None
) -> np.ndarray:
    """TFLite's QUANTIZE on integer input (Requantize): (x - zp_x) * (s_x / s_y) via a Q31 multiplier + zp_y.

    Per-channel parameters (either side) get one multiplier per channel;
    ``out_range`` overrides the storage range (int4 stored in int8).
    """
    s_x, zp_x = _channel_params(x_q, x.shape)
    s_y, zp_y = _channel_params(y_q, x.shape)
    ratio = s_x.astype(np.float64) / s_y.astype(np.float64)  # double(s_x) / double(s_y), per channel
    m, e = fp.quantize_multiplier_array(ratio)
    y = fp.multiply_by_quantized_multiplier(x.astype(np.int64) - zp_x, m, e) + zp_y
    lo, hi = out_range if out_range is not None else storage_range(out_dtype)
    return clamp_cast(y, lo, hi, out_dtype)


def _quantize_bound(f: float, s: float, zp: int) -> int:
    return zp + int(fp.round_half_away(np.float32(f) / np.float32(s)))


def relu_like(
    x: np.ndarray, *, x_q: QuantParams, y_q: QuantParams, out_dtype, lo_real: float, hi_real: float
) -> np.ndarray:
    """TFLite's quantized Relu (ReluQuantized) generalized to any [lo, hi]: rescale, then clamp.

    The input is moved to the output scale with a Q31 multiplier (identity
    when the parameters agree) and clamped to the quantized bounds (infinite
    bounds mean the storage limits).
    """
    s_x, zp_x = scalar_params(x_q, "input")
    s_y, zp_y = scalar_params(y_q, "output")
    qlo, qhi = storage_range(out_dtype)
    lo = qlo if not np.isfinite(lo_real) else max(qlo, _quantize_bound(lo_real, s_y, zp_y))
    hi = qhi if not np.isfinite(hi_real) else min(qhi, _quantize_bound(hi_real, s_y, zp_y))
    if s_x == s_y and zp_x == zp_y:
        y = x.astype(np.int64)
    else:
        m, e = fp.quantize_multiplier(float(s_x) / float(s_y))
        y = zp_y + fp.multiply_by_quantized_multiplier(x.astype(np.int64) - zp_x, m, e)
    return np.minimum(np.maximum(y, lo), hi).astype(out_dtype)


def concat(xs, *, x_qs, y_q: QuantParams, axis: int, out_dtype) -> np.ndarray:
    """Concatenation; an input whose parameters differ from the output's is requantized in float32.

    TFLite Micro requires equal parameters for int8/int16 (then this is a
    copy); for differing ones this follows TFLite's ConcatenationWithScaling:
    round(q * s_in/s_out - zp_in * s_in/s_out) + zp_out, in float32.
    """
    s_y, zp_y = scalar_params(y_q, "concat output")
    lo, hi = storage_range(out_dtype)
    parts = []
    f32 = np.float32
    for x, q in zip(xs, x_qs):
        s, zp = scalar_params(q, "concat input")
        if f32(s) == f32(s_y) and zp == zp_y:
            parts.append(x.astype(out_dtype))
            continue
        scale = f32(s) * (f32(1.0) / f32(s_y))
        bias = f32(-zp) * scale
        v = fp.round_half_away(x.astype(np.float32) * scale + bias).astype(np.int64) + zp_y
        parts.append(clamp_cast(v, lo, hi, out_dtype))
    return np.concatenate(parts, axis=axis)


# mean -------------------------------------------------------------------------------------------
def mean(x: np.ndarray, *, x_q: QuantParams, y_q: QuantParams, axes: tuple[int, ...], keepdims: bool, out_dtype):
    """TFLite Micro's quantized Mean (integer QuantizedMeanOrSum).

    The offset sum over the axes is scaled by one multiplier that folds in
    1/count: the Q31 multiplier of s_x/s_y is shifted left by floor(log2(count))
    (at most 32, and keeping the total shift >= -31) and divided by count with
    truncation; then one double-rounding multiply, plus the output zero point.
    """
    s_x, zp_x = scalar_params(x_q, "mean input")
    s_y, zp_y = scalar_params(y_q, "mean output")
    count = int(np.prod([x.shape[a] for a in axes]))
    m, e = fp.quantize_multiplier(float(s_x) / float(s_y))
    if count > 0:
        shift = min(count.bit_length() - 1, 32, 31 + e)
        m = (m << shift) // count
        e = e - shift
    total = fp.wrap_int32(x.astype(np.int64).sum(axis=axes, keepdims=keepdims) - zp_x * count)
    y = fp.multiply_by_quantized_multiplier(total, m, e) + zp_y
    lo, hi = storage_range(out_dtype)
    return clamp_cast(y, lo, hi, out_dtype)
