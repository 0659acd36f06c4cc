"""Helpers shared by op families: type checks, padding arithmetic, windows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rlx_edge.errors import OpError
from rlx_edge.ir import fixedpoint
from rlx_edge.ir.dtype import DType, promote
from rlx_edge.ir.ops._registry import Attr, OpDef
from rlx_edge.ir.shape import Dim, static_dim
from rlx_edge.ir.types import TensorType

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")
ACTIVATION = Attr("str", "none", choices=ACTIVATIONS, doc="fused activation applied to the output")
PADDING = Attr("str", "valid", choices=("valid", "same", "explicit"), doc="TFLite-style padding, or explicit pads")
PADS = Attr("ints", (0, 0, 0, 0), doc="explicit padding (top, bottom, left, right) when padding='explicit'")

QUANT_ACT = (DType.i8, DType.i16, DType.u8)
QUANT_WEIGHT = (DType.i8, DType.i4)


def fail(msg: str) -> None:
    raise OpError(msg)


def need_rank(t: TensorType, rank: int, what: str) -> None:
    if t.rank != rank:
        fail(f"{what} must have rank {rank}, got shape {list(t.shape)}")


def norm_axis(axis: int, rank: int, what: str) -> int:
    """``axis`` in [0, rank), accepting negatives counted from the end."""
    if not -rank <= axis < rank:
        fail(f"{what}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(axes: tuple[int, ...], rank: int, what: str) -> tuple[int, ...]:
    """Sorted distinct axes in [0, rank); an empty list is an error, not 'all axes'."""
    if not axes:
        # ONNX reads an absent axes list as "every axis"; frontends must spell that out
        fail(f"{what}: axes must name at least one axis")
    out = tuple(norm_axis(a, rank, what) for a in axes)
    if len(set(out)) != len(out):
        fail(f"{what}: axes {list(axes)} name the same axis twice")
    return tuple(sorted(out))


def need_float(t: TensorType, what: str) -> None:
    if not t.dtype.is_float:
        fail(f"{what} must be a float tensor, got {t.dtype}")


def elementwise_dtype(*ts: TensorType | None) -> DType:
    """Result dtype of a float or quantized elementwise op."""
    present = [t for t in ts if t is not None]
    dt = present[0].dtype
    for t in present[1:]:
        if t.dtype != dt and (t.dtype in QUANT_ACT or dt in QUANT_ACT):
            fail(f"operand dtypes {dt} and {t.dtype} differ; quantized operands must share a dtype")
        dt = promote(dt, t.dtype)
    return dt


def weighted_dtype(x: TensorType, w: TensorType, b: TensorType | None) -> DType:
    """Output dtype of conv / fully connected: float in float, or quantized (int8 x int8/int4)."""
    if x.dtype.is_float:
        if not w.dtype.is_float:
            fail(f"float input needs float weights, got {w.dtype}")
        if b is not None and not b.dtype.is_float:
            fail(f"float input needs a float bias, got {b.dtype}")
        return promote(x.dtype, w.dtype)
    if x.dtype not in QUANT_ACT:
        fail(f"input dtype {x.dtype} is neither float nor a quantized activation type")
    if w.dtype == DType.u8:
        # TFLite's pre-2020 scheme (asymmetric uint8 weights); TFLite Micro dropped it as well
        fail("weights are legacy uint8 (TFLite Micro dropped it too): quantize the float model to int8")
    if w.dtype not in QUANT_WEIGHT:
        fail(f"quantized input needs int8 or int4 weights, got {w.dtype}")
    if b is not None and b.dtype not in (DType.i32, DType.i64):
        fail(f"quantized bias must be i32 (or i64 for 16x8), got {b.dtype}")
    return x.dtype


def same_pads(size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite SAME padding: the extra pixel goes after."""
    out = -(-size // stride)
    eff = (k - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def window_pads(
    h: int, w: int, kh: int, kw: int, strides: tuple, dilations: tuple, padding: str, pads: tuple
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for a 2-D window op."""
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        return same_pads(h, kh, strides[0], dilations[0]) + same_pads(w, kw, strides[1], dilations[1])
    if len(pads) != 4 or min(pads) < 0:
        fail(f"pads must be 4 non-negative ints (top, bottom, left, right), got {pads}")
    return tuple(pads)  # type: ignore[return-value]


def window_out(size: Dim, k: int, stride: int, dilation: int, before: int, after: int, what: str) -> int:
    size = static_dim(size, what)
    eff = (k - 1) * dilation + 1
    out = (size + before + after - eff) // stride + 1
    if out <= 0:
        fail(f"{what} {size} is too small for a window of {eff} (padding {before}+{after})")
    return out


def check_pair(name: str, v: tuple) -> tuple[int, int]:
    if len(v) != 2 or min(v) < 1:
        fail(f"{name} must be two positive ints, got {v}")
    return v  # type: ignore[return-value]


def window_shape(
    x: TensorType, kh: int, kw: int, strides: tuple, dilations: tuple, padding: str, pads: tuple
) -> tuple[int, int, tuple[int, int, int, int]]:
    """Output height, width and the resolved pads of a 2-D window op over NHWC ``x``."""
    check_pair("strides", strides)
    check_pair("dilations", dilations)
    h = static_dim(x.shape[1], "input height")
    w = static_dim(x.shape[2], "input width")
    p = window_pads(h, w, kh, kw, strides, dilations, padding, pads)
    oh = window_out(h, kh, strides[0], dilations[0], p[0], p[1], "input height")
    ow = window_out(w, kw, strides[1], dilations[1], p[2], p[3], "input width")
    return oh, ow, p


def patches(x: np.ndarray, kh: int, kw: int, strides: tuple, dilations: tuple, pads: tuple, pad_value=0) -> np.ndarray:
    """Windows of an NHWC array as a (N, OH, OW, C, KH, KW) view (after padding)."""
    pt, pb, pl, pr = pads
    if any(pads):
        x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    ekh = (kh - 1) * dilations[0] + 1
    ekw = (kw - 1) * dilations[1] + 1
    win = sliding_window_view(x, (ekh, ekw), axis=(1, 2))
    return win[:, :: strides[0], :: strides[1], :, :: dilations[0], :: dilations[1]]


def compute_dtype(dt: np.dtype) -> np.dtype:
    """Float references (and the jax target) compute f16/bf16 in f32 and round the result afterwards."""
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def apply_activation(y: np.ndarray, activation: str) -> np.ndarray:
    """A fused float activation; numpy or jax (the jax target's float layers use this one too)."""
    if activation == "none":
        return y
    xp = fixedpoint.namespace(y)
    if activation == "relu":
        return xp.maximum(y, 0)
    if activation == "relu6":
        return xp.clip(y, 0, 6)
    if activation == "relu_n1_to_1":
        return xp.clip(y, -1, 1)
    raise AssertionError(activation)


def finish(y: np.ndarray, dtype: DType) -> np.ndarray:
    """Cast a float result to the op's output dtype (bf16: rounded, held as float32); numpy or jax."""
    from rlx_edge.ir.dtype import round_to_bf16

    xp = fixedpoint.namespace(y)
    if xp is not np:  # jax rounds to bfloat16 the same way (nearest, ties to even) in its own cast
        return y.astype(xp.bfloat16).astype(xp.float32) if dtype == DType.bf16 else y.astype(dtype.numpy)
    if dtype == DType.bf16:
        return round_to_bf16(y.astype(np.float32))
    return np.asarray(y).astype(dtype.numpy, copy=False)


# samplers -------------------------------------------------------------------
FLOAT_SAMPLE_DTYPES = (np.float32, np.float64, np.float16)


def rand_float(rng: np.random.Generator, shape, dtype=np.float32, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def rand_shape(rng: np.random.Generator, rank: int, lo: int = 1, hi: int = 5) -> tuple[int, ...]:
    return tuple(int(v) for v in rng.integers(lo, hi + 1, size=rank))


def rand_window_attrs(rng: np.random.Generator) -> dict:
    padding = str(rng.choice(["valid", "same", "explicit"]))
    attrs = {"strides": tuple(int(s) for s in rng.integers(1, 3, 2)), "padding": padding}
    if padding == "explicit":
        attrs["pads"] = tuple(int(p) for p in rng.integers(0, 2, 4))
    return attrs


def broadcastable_pair(rng: np.random.Generator, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: some dims of b become 1, and b may drop leading dims."""
    a = rand_shape(rng, rank)
    b = [1 if rng.random() < 0.3 else d for d in a]
    drop = int(rng.integers(0, rank + 1))
    return a, tuple(b[drop:])


# derivatives ------------------------------------------------------------------
def derivative(op: OpDef) -> Callable[[Callable], Callable]:
    """Declare a one-input elementwise op's ``jvp`` and ``vjp`` from its derivative.

    ``fn(e, x, y, **attrs)`` builds dy/dx (a tensor broadcasting against
    ``x``; ``None`` for a zero derivative) from the input ``x`` and output
    ``y``; both rules multiply it into the tangent or cotangent.
    """

    def attach(fn: Callable) -> Callable:
        @op.jvp
        def _jvp(e, primals, outputs, tangents, **attrs):
            d = fn(e, primals[0], outputs[0], **attrs)
            return [None if d is None else e.mul(tangents[0], d)]

        @op.vjp
        def _vjp(e, primals, outputs, cotangents, **attrs):
            d = fn(e, primals[0], outputs[0], **attrs)
            return [None if d is None else e.mul(cotangents[0], d)]

        return fn

    return attach


def batch_into_leading(op: OpDef) -> None:
    """A vmap rule for ops that already map over their first input's leading (batch) axis:
    the vmap axis is folded into it, and unfolded from every output. Other inputs batched: no rule."""

    @op.batch
    def _batch(e, inputs, batched, **attrs):
        if any(batched[1:]):
            return None
        x = inputs[0]
        shape = e.static_shape(x)
        folded = e.reshape(x, shape=(shape[0] * shape[1], *shape[2:]))
        got = e.op(op.name, folded, *inputs[1:], **attrs)
        outs = got if isinstance(got, tuple) else (got,)
        return [e.reshape(o, shape=(shape[0], shape[1], *e.static_shape(o)[1:])) for o in outs]


def batch_shifting_axes(op: OpDef, attr: str) -> None:
    """A vmap rule for ops whose attribute ``attr`` (an axis, or a tuple of them) names axes of the
    first input: the batch axis goes first, so each named axis moves up by one. Other inputs batched
    (normalization parameters): no rule."""

    @op.batch
    def _batch(e, inputs, batched, **attrs):
        if any(batched[1:]):
            return None
        rank = len(inputs[0].shape) - 1
        value = attrs[attr]
        if isinstance(value, tuple):
            moved: int | tuple[int, ...] = tuple(v % rank + 1 for v in value)
        else:
            moved = value % rank + 1
        got = e.op(op.name, *inputs, **{**attrs, attr: moved})
        return list(got) if isinstance(got, tuple) else [got]
