"""Unary activations."""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, compute_dtype, derivative, finish, rand_float, rand_shape
from rlx_edge.ir.ops._libm import libm_f32
from rlx_edge.ir.ops._quantized import byte_table, clamp_cast, quantize_bound, scalar_params, storage_range
from rlx_edge.ir.ops._registry import Attr, OpDef, QContext, defop
from rlx_edge.ir.types import QuantParams, TensorType


def _unary(
    name: str,
    fn,
    *,
    attrs: dict | None = None,
    float_only: bool = True,
    int_dtypes=("i8", "i16"),
    sample_attrs=None,
    int16_draw=None,
    doc: str,
) -> OpDef:
    """Declare one shape-preserving unary op (``int16_draw``: the sampler's quantized int16 draws, now and then)."""
    op = defop(
        name,
        family="activation",
        inputs=("x",),
        attrs=attrs or {},
        inplace=True,
        elementwise=True,
        int_dtypes=int_dtypes,
        doc=doc,
    )

    @op.infer
    def _infer(x, **kw):
        if float_only and not x.dtype.is_float and x.quant is None:
            from rlx_edge.ir.ops._common import fail

            fail(f"{name} needs a float or quantized input, got {x.dtype}")
        return TensorType(x.shape, x.dtype)

    @op.reference
    def _ref(x, **kw):
        if x.dtype.kind in "iu":
            return fn(x, **kw).astype(x.dtype)
        dt = x.dtype
        return finish(fn(x.astype(compute_dtype(dt)), **kw), _dtype_of(dt))

    @op.sample
    def _sample(rng):
        # drawn first: where the op x target test's seeds give every target an int16 and an int8 draw
        # (tests/ir/ops/test_activation_int16.py holds that)
        if int16_draw is not None and rng.random() < 0.4:
            return int16_draw(rng, rand_shape(rng, int(rng.integers(0, 5))))
        shape = rand_shape(rng, int(rng.integers(0, 5)))
        if not float_only and rng.random() < 0.2:
            x = rng.integers(-20, 20, shape).astype(np.int32)
        else:
            x = rand_float(rng, shape, FLOAT_SAMPLE_DTYPES[int(rng.integers(3))], scale=4.0)
        kw = {}
        if name == "clamp":
            lo = float(rng.uniform(-3, 0))
            kw = {"min": lo, "max": lo + float(rng.uniform(0, 6))}
        if name == "gelu":
            kw = {"approximate": str(rng.choice(["none", "tanh"]))}
        if sample_attrs is not None:
            kw = sample_attrs(rng)
        return [x], kw

    return op


def _dtype_of(dt):
    from rlx_edge.ir.dtype import from_numpy

    return from_numpy(dt)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf, otypes=[x.dtype])(x / np.sqrt(2)))


relu = _unary("relu", lambda x: np.maximum(x, 0), float_only=False, doc="max(x, 0)")
relu6 = _unary("relu6", lambda x: np.clip(x, 0, 6), float_only=False, doc="min(max(x, 0), 6)")
clamp = _unary(
    "clamp",
    lambda x, min, max: np.clip(x, min, max),
    attrs={"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
    float_only=False,
    doc="min(max(x, min), max)",
)


def _int16_sigmoid_tanh_draw(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """An int16 input as 16x8 models have it (zero point 0), its scale one of the powers of two the
    kernels take as they are or any other (the op x target test's other quantized draws are int8); the
    output at 2**-15, 0, as TFLite fixes it."""
    x = rng.integers(-(2**15), 2**15, shape).astype(np.int16)
    scale = float(rng.choice([2.0**-12, 2.0**-11, float(np.exp2(rng.uniform(-17.0, -3.0)))]))
    out_q = QuantParams(np.float32(2.0**-15), 0, storage="i16")
    return [x], {}, [out_q], [QuantParams(np.float32(scale), 0, storage="i16")]


# The integer kernels of these two are TFLite Micro's int8 and int16 ones; hard_swish's its int8 one.
sigmoid = _unary(
    "sigmoid",
    lambda x: 1 / (1 + np.exp(-x)),
    int_dtypes=("i8", "i16"),
    int16_draw=_int16_sigmoid_tanh_draw,
    doc="1 / (1 + exp(-x)) (TFLite LOGISTIC)",
)
tanh = _unary("tanh", np.tanh, int_dtypes=("i8", "i16"), int16_draw=_int16_sigmoid_tanh_draw, doc="tanh(x)")
gelu = _unary(
    "gelu",
    _gelu,
    attrs={"approximate": Attr("str", "none", choices=("none", "tanh"))},
    doc="x * Phi(x), exact (erf) or the tanh approximation",
)
silu = _unary("silu", lambda x: x / (1 + np.exp(-x)), doc="x * sigmoid(x)")
hard_swish = _unary(
    "hard_swish", lambda x: x * np.clip(x + 3, 0, 6) / 6, int_dtypes=("i8",), doc="x * relu6(x + 3) / 6"
)
leaky_relu = _unary(
    "leaky_relu",
    lambda x, alpha: np.where(x > 0, x, x * alpha),
    attrs={"alpha": Attr("float", 0.2, doc="slope for x <= 0 (TFLite's default; ONNX's is 0.01)")},
    sample_attrs=lambda rng: {"alpha": float(rng.choice([0.01, 0.1, 0.2, 0.5, 1.5]))},
    doc="x if x > 0 else alpha * x (TFLite LEAKY_RELU, ONNX LeakyRelu)",
)
elu = _unary(
    "elu",
    lambda x: np.where(x < 0, np.expm1(np.minimum(x, 0)), x),
    int_dtypes=("i8",),
    doc="x if x >= 0 else exp(x) - 1 (TFLite ELU)",
)


# derivatives ------------------------------------------------------------------------
# dy/dx built from the input x and the output y; the clamps' corners (a set of measure
# zero) get 0, as the open-interval masks give.
derivative(relu)(lambda e, x, y: e.greater(x, 0))
derivative(relu6)(lambda e, x, y: e.between(x, 0, 6))
derivative(clamp)(lambda e, x, y, min, max: e.between(x, min, max))
derivative(sigmoid)(lambda e, x, y: e.sub(y, e.square(y)))
derivative(tanh)(lambda e, x, y: e.sub(e.const(1, y), e.square(y)))
derivative(leaky_relu)(lambda e, x, y, alpha: e.add(e.greater(x, 0), e.mul(e.less(x, 0), e.const(alpha, x))))
# exp(x) = y + 1 where x < 0, else 1
derivative(elu)(lambda e, x, y: e.add(e.mul(e.less(x, 0), y), e.const(1, x)))
# relu6(x + 3) / 6 + x / 6 on (-3, 3)
derivative(hard_swish)(
    lambda e, x, y: e.mul(e.add(e.relu6(e.add(x, e.const(3, x))), e.mul(x, e.between(x, -3, 3))), e.const(1 / 6, x))
)


@derivative(silu)
def _silu_derivative(e, x, y):
    s = e.sigmoid(x)
    return e.add(s, e.sub(y, e.mul(y, s)))  # s + x s (1 - s) with x s = y


_GELU_C = math.sqrt(2 / math.pi)
_GELU_K = 0.044715


@derivative(gelu)
def _gelu_derivative(e, x, y, approximate):
    c = lambda v: e.const(v, x)  # noqa: E731
    if approximate == "tanh":
        # 0.5 (1 + t) + 0.5 x (1 - t^2) u',  t = tanh(u),  u = C (x + K x^3)
        x2 = e.square(x)
        t = e.tanh(e.mul(e.add(x, e.mul(e.mul(x2, x), c(_GELU_K))), c(_GELU_C)))
        du = e.mul(e.add(e.mul(x2, c(3 * _GELU_K)), c(1.0)), c(_GELU_C))
        left = e.mul(e.add(t, c(1.0)), c(0.5))
        return e.add(left, e.mul(e.mul(e.mul(x, c(0.5)), e.sub(c(1.0), e.square(t))), du))
    # Phi(x) + x phi(x)
    phi_cdf = e.mul(e.add(e.erf(e.mul(x, c(1 / math.sqrt(2)))), c(1.0)), c(0.5))
    pdf = e.mul(e.exp(e.mul(e.square(x), c(-0.5))), c(1 / math.sqrt(2 * math.pi)))
    return e.add(phi_cdf, e.mul(x, pdf))


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized activations, split as its kernels are: prepare
# computes multipliers, shifts and clamps once from the scales, eval only does
# integer math (in numpy or jax.numpy). Every prepare also stores the op as a
# 256-entry table for byte inputs, which the Cortex-M kernel looks up.
def _rescale_clamp_params(ctx: QContext, lo_real: float, hi_real: float) -> dict:
    """TFLite's ReluQuantized generalized to any [lo, hi]: rescale to the output, then clamp.

    The real bounds are quantized on the output grid (infinite ones are the
    storage limits). Equal input and output parameters skip the rescale; its
    multiplier is then the identity (1 << 30, shift 1), for hardware that
    always multiplies.
    """
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, "input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, "output")
    dtype = ctx.out_types[0].dtype.numpy
    qlo, qhi = storage_range(dtype)
    lo = qlo if not np.isfinite(lo_real) else max(qlo, quantize_bound(lo_real, s_y, zp_y))
    hi = qhi if not np.isfinite(hi_real) else min(qhi, quantize_bound(hi_real, s_y, zp_y))
    identity = s_x == s_y and zp_x == zp_y
    mult, shift = (1 << 30, 1) if identity else fp.quantize_multiplier(float(s_x) / float(s_y))
    p = {
        "in_zp": zp_x, "identity": identity, "mult": mult, "shift": shift, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip
    p["table"] = byte_table(_rescale_clamp_eval, p, ctx.in_types[0].dtype.numpy)
    return p


def _rescale_clamp_eval(p, x, **attrs):
    xp = fp.namespace(x)
    y = x.astype(xp.int64)
    if not p.identity:
        y = p.out_zp + fp.multiply_by_quantized_multiplier(y - p.in_zp, p.mult, p.shift)
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


@relu.prepare
def _relu_prepare(ctx: QContext) -> dict:
    return _rescale_clamp_params(ctx, 0.0, float("inf"))


@relu6.prepare
def _relu6_prepare(ctx: QContext) -> dict:
    return _rescale_clamp_params(ctx, 0.0, 6.0)


@clamp.prepare
def _clamp_prepare(ctx: QContext, min: float, max: float) -> dict:  # the attribute names of the op
    return _rescale_clamp_params(ctx, min, max)


relu.eval(_rescale_clamp_eval)
relu6.eval(_rescale_clamp_eval)
clamp.eval(_rescale_clamp_eval)


def _declared_int_input(op: OpDef, ctx: QContext) -> None:
    """The input is one of the integer types the op declares a kernel for (``int_dtypes``)."""
    dtype = ctx.in_types[0].dtype
    if dtype not in op.int_dtypes:
        have = ", ".join(map(str, op.int_dtypes))
        raise UnsupportedOpError(f"node {ctx.node!r} ({op.name}): the integer kernel takes {have} inputs, not {dtype}")


# logistic / tanh: gemmlowp fixed point on the input in Q4.27
_INPUT_INTEGER_BITS = 4


def _sigmoid_tanh_prepare(op: OpDef, eval_fn):
    def prepare(ctx: QContext) -> dict:
        """Input multiplier, shift and range radius as TFLite's int8 logistic/tanh Prepare.

        The multiplier comes from frexp without QuantizeMultiplier's carry
        handling (it wraps in int32 where the mantissa rounds up to 2**31),
        exactly as the kernels compute it.
        """
        _declared_int_input(op, ctx)
        if ctx.in_types[0].dtype == DType.i16:
            return _int16_prepare(op, ctx)
        s_x, zp_x = scalar_params(ctx.in_types[0].quant, f"{op.name} input")
        mant, shift = math.frexp(float(s_x) * float(1 << (31 - _INPUT_INTEGER_BITS)))
        mult = int(fp.wrap_int32(int(fp.round_half_away(np.float64(mant * 2.0**31)))))
        radius = fp.calculate_input_radius(_INPUT_INTEGER_BITS, shift, 31)
        p = {"in_zp": zp_x, "mult": mult, "shift": shift, "radius": radius}
        p["table"] = byte_table(eval_fn, p, np.int8)
        return p

    return prepare


def _saturate_outside_radius(v, out, radius: int):
    """Inputs at least ``radius`` from the zero point give the int8 limits (the kernels' shortcut)."""
    xp = fp.namespace(v, out)
    return xp.where(v <= -radius, -128, xp.where(v >= radius, 127, out)).astype(xp.int8)


def _q4_eval(p, x, fixed_fn, out_frac_bits: int, out_zp: int):
    """int8 logistic and tanh: the input rescaled to Q4.27, ``fixed_fn`` (a Q0.31 result), then the output grid
    of scale ``2**-out_frac_bits`` and zero point ``out_zp``."""
    xp = fp.namespace(x)
    v = x.astype(xp.int64) - p.in_zp
    q4 = fp.multiply_by_quantized_multiplier(v, p.mult, p.shift)
    out = fp.rounding_divide_by_pot(fixed_fn(q4, _INPUT_INTEGER_BITS), 31 - out_frac_bits)
    return _saturate_outside_radius(v, xp.clip(out + out_zp, -128, 127), p.radius)


def _int16_prepare(op: OpDef, ctx: QContext) -> dict:
    """TFLite Micro's int16 LOGISTIC / TANH Prepare: zero points 0 and an output scale of 2**-15 (its
    checks), and the input's multiplier and shift onto the table's grid
    (``fixedpoint.int16_sigmoid_tanh_input_params``)."""
    where = f"node {ctx.node!r} ({op.name})"
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, f"{op.name} input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, f"{op.name} output")
    if zp_x != 0 or zp_y != 0:
        raise UnsupportedOpError(f"{where}: the int16 kernel needs zero points 0, got input {zp_x}, output {zp_y}")
    log2, pot = fp.checked_log2(s_y)
    if not pot or log2 != -15:
        raise UnsupportedOpError(f"{where}: the int16 kernel's output scale is 2**-15, got {s_y:g}; quantize it so")
    mult, shift = fp.int16_sigmoid_tanh_input_params(s_x, tanh=op is tanh)
    if mult > fp.INT16_MAX:  # TFLite's DCHECK: the product with an int16 input must fit int32
        raise UnsupportedOpError(f"{where}: input scale {s_x:g} is too large for the int16 kernel (at most 2.66)")
    return {"int16": True, "mult": mult, "shift": shift}


@sigmoid.eval
def _sigmoid_eval(p, x):
    """int8: output scale 1/256, zero point -128, as the kernel assumes; int16: 2**-15, 0."""
    if p.get("int16"):
        return fp.logistic_int16(x, p.mult, p.shift).astype(fp.namespace(x).int16)
    return _q4_eval(p, x, fp.logistic_fixed, 8, -128)


@tanh.eval
def _tanh_eval(p, x):
    """int8: output scale 1/128, zero point 0, as the kernel assumes; int16: 2**-15, 0."""
    if p.get("int16"):
        return fp.tanh_int16(x, p.mult, p.shift).astype(fp.namespace(x).int16)
    return _q4_eval(p, x, fp.tanh_fixed, 7, 0)


sigmoid.prepare(_sigmoid_tanh_prepare(sigmoid, _sigmoid_eval))
tanh.prepare(_sigmoid_tanh_prepare(tanh, _tanh_eval))


# hard swish: 16-bit fixed point with Q15 multipliers
@hard_swish.prepare
def _hard_swish_prepare(ctx: QContext) -> dict:
    """The input moves to a "hi-res" scale (x 2**7); one Q15 multiplier takes it to
    the output scale, another maps [-3, 3] onto the int16 range for the relu-ish
    factor in [0, 1]."""
    _declared_int_input(hard_swish, ctx)
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, "hard_swish input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, "hard_swish output")
    f32 = np.float32
    hires_scale = f32(1.0 / 128.0) * f32(s_x)
    out_m32, out_e = fp.quantize_multiplier(float(hires_scale / f32(s_y)))
    rel_m32, rel_e = fp.quantize_multiplier(float(hires_scale / (f32(3.0) / f32(32768.0))))
    if out_e > 0:
        raise ValueError("hard_swish: output multiplier must not exceed 1 (TFLite requires it)")
    dtype = ctx.out_types[0].dtype.numpy
    lo, hi = storage_range(dtype)
    p = {
        "in_zp": zp_x, "out_zp": zp_y,
        "out_mult": fp.down_scale_int32_to_int16_multiplier(out_m32), "out_shift": out_e,
        "rel_mult": fp.down_scale_int32_to_int16_multiplier(rel_m32), "rel_shift": rel_e,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip
    p["table"] = byte_table(_hard_swish_eval, p, np.int8)
    return p


@hard_swish.eval
def _hard_swish_eval(p, x):
    """x * relu6(x + 3) / 6; the final product is a truncating doubling high
    multiply (no rounding, which cancels the bias of the earlier roundings)."""
    xp = fp.namespace(x)
    hires = fp.wrap_int32((x.astype(xp.int64) - p.in_zp) << 7)
    hires = ((hires + 2**15) & 0xFFFF) - 2**15  # int16 storage as in the kernel
    pre_out = fp.saturating_rounding_doubling_high_mul_int16(hires, p.out_mult)
    rel = hires
    if p.rel_shift > 0:
        rel = fp.saturating_left_shift_int16(rel, p.rel_shift - 1)
    rel = fp.saturating_rounding_doubling_high_mul_int16(rel, p.rel_mult)
    if p.rel_shift > 0:
        rel = fp.saturating_left_shift_int16(rel, 1)
    if p.rel_shift < 0:
        rel = fp.rounding_divide_by_pot(rel, -p.rel_shift)
    rel = (rel + (1 << 15)) >> 1
    pre = fp.saturating_doubling_high_mul_int16(rel, pre_out)
    y = fp.rounding_divide_by_pot(pre, -p.out_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


# leaky relu: two multipliers, chosen by the sign of the offset input
@leaky_relu.prepare
def _leaky_relu_prepare(ctx: QContext, alpha: float) -> dict:
    """TFLite Micro's LeakyRelu Prepare: the identity (s_x / s_y) and alpha (s_x * alpha / s_y)
    multipliers, each computed in double from the float32 scales and alpha, then QuantizeMultiplier.

    Older TFLite Micro sources compute both ratios in float32 and then widen them; the interpreter
    rlx-edge is checked against (``tflite_micro`` 0.dev20261023) divides in double: on TFLite Micro's
    int16 seanet LEAKY_RELU integration models the float32 ratios give 19 outputs in 126,080 off by one
    (near-ties such as 2445.50001), the double ones none (``tests/targets/reference/test_int_ops_tflm.py``)."""
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, "leaky_relu input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, "leaky_relu output")
    a = float(np.float32(alpha))  # TFLite stores alpha as a float32
    id_mult, id_shift = fp.quantize_multiplier(s_x / s_y)
    alpha_mult, alpha_shift = fp.quantize_multiplier(s_x * a / s_y)
    dtype = ctx.out_types[0].dtype.numpy
    lo, hi = storage_range(dtype)
    p = {
        "in_zp": zp_x, "out_zp": zp_y, "id_mult": id_mult, "id_shift": id_shift,
        "alpha_mult": alpha_mult, "alpha_shift": alpha_shift, "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip
    p["table"] = byte_table(_leaky_relu_eval, p, ctx.in_types[0].dtype.numpy, alpha=alpha)
    return p


@leaky_relu.eval
def _leaky_relu_eval(p, x, alpha):
    xp = fp.namespace(x)
    v = x.astype(xp.int64) - p.in_zp
    pos = fp.multiply_by_quantized_multiplier(v, p.id_mult, p.id_shift)
    neg = fp.multiply_by_quantized_multiplier(v, p.alpha_mult, p.alpha_shift)
    return clamp_cast(p.out_zp + xp.where(v >= 0, pos, neg), p.act_min, p.act_max, p.dtype)


# elu: TFLite Micro's int8 kernel is a table built in float32 at Prepare (elu.cc)
@elu.prepare
def _elu_prepare(ctx: QContext) -> dict:
    """Every int8 input dequantized (s_x * (q - zp_x)), mapped by exp(x) - 1 where negative, and
    quantized onto the output (times 1 / s_y, rounded half away from zero, plus zp_y, truncated
    to an integer, clamped), all in float32 as the kernel's PopulateLookupTable does. exp is
    rounded from double to float32 (what libm's expf returns but in the rarest ties)."""
    _declared_int_input(elu, ctx)
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, "elu input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, "elu output")
    f32 = np.float32
    values = np.arange(-128, 128)
    deq = f32(s_x) * (values - zp_x).astype(f32)
    expm1 = (np.exp(deq.astype(np.float64)).astype(f32) - f32(1)).astype(f32)
    transformed = np.where(deq < 0, expm1, deq).astype(f32)
    rescaled = fp.round_half_away(transformed * (f32(1) / f32(s_y))).astype(f32)
    quantized = np.trunc(rescaled + f32(zp_y)).astype(np.int64)
    table = np.empty(256, np.int8)
    table[values.astype(np.int8).view(np.uint8)] = np.clip(quantized, -128, 127)
    return {"table": table}


@elu.eval
def _elu_eval(p, x):
    """The prepared table, indexed by the input's bit pattern."""
    xp = fp.namespace(x)
    return xp.asarray(p.table)[x.astype(xp.int64) & 0xFF]


# gelu / silu: lookup tables built at prepare ----------------------------------------
# The Program carries each node's table; no target recomputes it. int8: 256 entries
# indexed by the input's bit pattern. int16: TFLite's 513-entry table read with linear
# interpolation between entries (fixedpoint.int16_table_lookup). GELU's tables are
# TFLite's (kernels/gelu.cc with LUTPopulate, all float32); TFLite Micro has no GELU
# kernel. SILU is no TFLite builtin: its tables are our own, sampled in float64.
_F32 = np.float32
_SQRT1_2 = _F32(math.sqrt(0.5))
_SQRT_2_PI = _F32(math.sqrt(2 / math.pi))  # TFLite's kSqrt2dPi, rounded once to float32


def _f32_of_f64(fn, v: np.ndarray) -> np.ndarray:
    """``fn`` of float32 values evaluated in float64 and rounded once to float32."""
    return np.asarray(fn(v.astype(np.float64)), np.float64).astype(_F32)


def _gelu_f32(v: np.ndarray, approximate: str) -> np.ndarray:
    """TFLite's GeluTransform / GeluTransformApproximate: float32 throughout, in its order of operations,
    with the C library's tanhf / erfcf as TFLite calls them (_libm)."""
    v = np.asarray(v, _F32)
    half_x = _F32(0.5) * v
    if approximate == "tanh":
        inner = v + _F32(_GELU_K) * v * v * v
        return half_x * (_F32(1) + libm_f32("tanhf", _SQRT_2_PI * inner))
    # the erfc form: 1 + erf(x / sqrt 2) cancels for large negative x
    return half_x * libm_f32("erfcf", v * -_SQRT1_2)


def _silu_f64(v: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) in float64 (the sigmoid in the form that does not overflow)."""
    v = np.asarray(v, np.float64)
    e = np.exp(-np.abs(v))
    return v * np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def _lut_int8_f32(transform, s_x, zp_x: int, s_y, zp_y: int) -> np.ndarray:
    """TFLite's LUTPopulate for int8: each input dequantized (s_x * (q - zp_x)), transformed,
    times 1 / s_y rounded half away from zero, plus zp_y, truncated, clamped; float32 throughout.
    Indexed by the input's bit pattern."""
    q = np.arange(-128, 128)
    deq = _F32(s_x) * (q - zp_x).astype(_F32)
    rescaled = fp.round_half_away(transform(deq) * (_F32(1) / _F32(s_y))).astype(_F32)
    out = np.clip(np.trunc(rescaled + _F32(zp_y)), -128, 127).astype(np.int8)
    table = np.empty(256, np.int8)
    table[q.astype(np.int8).view(np.uint8)] = out
    return table


def _lut_int8_f64(fn, s_x, zp_x: int, s_y, zp_y: int) -> np.ndarray:
    """Our int8 table: fn(s_x * (q - zp_x)) / s_y in float64, rounded half away from zero, plus zp_y,
    clamped. Indexed by the input's bit pattern."""
    q = np.arange(-128, 128)
    y = fn(float(s_x) * (q - zp_x).astype(np.float64)) / float(s_y)
    out = np.clip(fp.round_half_away(y) + zp_y, -128, 127).astype(np.int8)
    table = np.empty(256, np.int8)
    table[q.astype(np.int8).view(np.uint8)] = out
    return table


def _lut_int16(transform_f32, s_x, zp_x: int, s_y) -> np.ndarray:
    """TFLite's LUTPopulate for int16 (zero output zero point): 512 steps over the input's
    range [s_x (-32768 - zp_x), s_x (32767 - zp_x)], each sample times 65536 / (s_y * 65535)
    (the output range's width), biased by half the interpolation error at the step's midpoint;
    float32 throughout. fixedpoint.gen_lut_int16 is that table for outputs in [-1, 1] (a factor
    32768); the transform scaled by k = factor / 32768 gives it for any output scale, since
    multiplying by 32768 is exact in float32."""
    lo = _F32(s_x) * _F32(fp.INT16_MIN - zp_x)
    hi = _F32(s_x) * _F32(fp.INT16_MAX - zp_x)
    width = _F32(s_y) * _F32(fp.INT16_MAX) - _F32(s_y) * _F32(fp.INT16_MIN)
    k = (_F32(65536) / width) / _F32(32768)
    return fp.gen_lut_int16(lambda v: transform_f32(np.asarray([v], _F32))[0] * k, lo, hi)


def _lut_prepare(op: OpDef, int8_table, int16_transform):
    """A prepare that stores the op's int8 table (``int8_table(s_x, zp_x, s_y, zp_y, **attrs)``) or its
    int16 one (``int16_transform(**attrs)``: the float32 transform the table samples)."""

    def prepare(ctx: QContext, **attrs) -> dict:
        _declared_int_input(op, ctx)
        where = f"node {ctx.node!r} ({op.name})"
        s_x, zp_x = scalar_params(ctx.in_types[0].quant, f"{op.name} input")
        s_y, zp_y = scalar_params(ctx.out_types[0].quant, f"{op.name} output")
        if ctx.out_types[0].dtype != ctx.in_types[0].dtype:
            raise UnsupportedOpError(f"{where}: the table maps {ctx.in_types[0].dtype} to itself, "
                                     f"not to {ctx.out_types[0].dtype}")  # fmt: skip
        if ctx.in_types[0].dtype == DType.i16:
            if zp_y != 0:  # TFLite's int16 table holds outputs without the zero point
                raise UnsupportedOpError(f"{where}: the int16 table needs output zero point 0, got {zp_y}")
            return {"int16": True, "lut": _lut_int16(int16_transform(**attrs), s_x, zp_x, s_y)}
        return {"table": int8_table(s_x, zp_x, s_y, zp_y, **attrs)}

    return prepare


def _wrap_int16(v):
    return ((v + 2**15) & 0xFFFF) - 2**15


def _lut_lookup_int16(x, lut):
    """TFLite's LUTLookup for int16 (fixedpoint.int16_table_lookup) with its int16 storage: the slope
    between two entries and the result wrap to int16. Tables of saturating outputs have such slopes
    (an entry biased below 0 next to one clamped at 32767); the softmax's tables never do."""
    xp = fp.namespace(x, lut)
    v, table = x.astype(xp.int64), xp.asarray(lut).astype(xp.int64)
    base = table[256 + (v >> 7)]
    slope = _wrap_int16(table[257 + (v >> 7)] - base)
    return _wrap_int16(base + ((slope * (v & 0x7F) + 64) >> 7)).astype(xp.int16)


def _lut_eval(p, x, **attrs):
    """int8: the prepared table, indexed by the input's bit pattern; int16: TFLite's interpolated lookup."""
    xp = fp.namespace(x)
    if p.get("int16"):
        return _lut_lookup_int16(x, p.lut)
    return xp.asarray(p.table)[x.astype(xp.int64) & 0xFF]


gelu.prepare(
    _lut_prepare(
        gelu,
        lambda s_x, zp_x, s_y, zp_y, approximate: _lut_int8_f32(
            lambda v: _gelu_f32(v, approximate), s_x, zp_x, s_y, zp_y
        ),
        lambda approximate: lambda v: _gelu_f32(v, approximate),
    )
)
silu.prepare(
    _lut_prepare(
        silu,
        lambda s_x, zp_x, s_y, zp_y: _lut_int8_f64(_silu_f64, s_x, zp_x, s_y, zp_y),
        lambda: lambda v: _f32_of_f64(_silu_f64, np.asarray(v, _F32)),
    )
)
gelu.eval(_lut_eval)
silu.eval(_lut_eval)
