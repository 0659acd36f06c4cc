"""More layout ops: TFLite's data-movement builtins that ``layout.py`` has no op for.

Like every layout op they move, pick or repeat elements and never compute a
value, so their integer semantics are the float reference on stored integers
(TFLite Micro's kernels copy bytes too) and their quantized output keeps the
input's parameters. The one exception is ``stack``, which joins several
inputs like ``concat`` and shares its integer semantics (inputs on other
parameters than the output's are requantized). Quantized, ``space_to_batch_nd``
pads with the stored value 0 as TFLite Micro does, not with the zero point.

The references are written against the input's array namespace
(:func:`rlx_edge.ir.fixedpoint.namespace`), so the JAX target runs them as
they are.
"""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops._common import fail, norm_axis, rand_shape
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.ops.layout import (
    _OPEN,
    _SAMPLE_DTYPES,
    _channel_axis,
    _concat_eval,
    _concat_prepare,
    _concat_quant,
    _lost_channels,
    _maybe_negative,
    _moved,
    _rand_tensor,
    _tensor_of,
)
from rlx_edge.ir.shape import format_shape, is_static
from rlx_edge.ir.types import QuantParams, TensorType


def _static(x: TensorType, what: str) -> tuple[int, ...]:
    if not is_static(x.shape):
        fail(f"{what}: input shape {format_shape(x.shape)} must be static; bind the symbols first")
    return tuple(int(d) for d in x.shape)


def _per_tensor_only(op: str, x: TensorType) -> QuantParams | None:
    """The input's parameters when they cannot be per-channel (the op mixes the channel axis)."""
    if _channel_axis(x) is not None:
        _lost_channels(op, x, "does not survive the op; quantize it per tensor")
    return x.quant


def _int16_draw(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, QuantParams]:
    """An int16 tensor with symmetric 16x8 parameters (the op x target test's quantized draws are int8)."""
    x = np.asarray(rng.integers(-32768, 32768, shape), dtype=np.int16)
    return x, QuantParams(np.float32(rng.uniform(1e-4, 1e-3)), 0, storage="i16")


def _draw_x(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, QuantParams | None]:
    if rng.random() < 0.15:
        return _int16_draw(rng, shape)
    return _rand_tensor(rng, shape), None


# stack / unstack ---------------------------------------------------------------------
stack = defop(
    "stack",
    family="layout",
    inputs=("*xs",),
    attrs={"axis": Attr("int", doc="position of the new axis in the output (negative counts from the end)")},
    doc="Join same-shaped tensors along a new axis (TFLite PACK, numpy stack).",
)


@stack.infer
def _stack_infer(*xs, axis):
    first = xs[0]
    a = norm_axis(axis, first.rank + 1, "stack")
    for i, t in enumerate(xs[1:], 1):
        if t.shape != first.shape or t.dtype != first.dtype:
            fail(
                f"stack: input {i} is {t.dtype}{format_shape(t.shape)} but input 0 is"
                f" {first.dtype}{format_shape(first.shape)}; stacked tensors must agree"
            )
    moved = []
    for t in xs:
        ch = _channel_axis(t)
        moved.append(t if ch is None else TensorType(t.shape, t.dtype, _moved(t.quant, ch + (ch >= a))))
    # equal parameters pass through; others are the caller's choice (out_quant), as for concat
    q = _concat_quant(tuple(moved), -1)
    return TensorType((*first.shape[:a], len(xs), *first.shape[a:]), first.dtype, q)


@stack.reference
def _stack_ref(*xs, axis):
    return fp.namespace(*xs).stack(xs, axis=axis)


@stack.prepare
def _stack_prepare(ctx, *, axis):
    """Concat's parameters: a plain copy of inputs on the output's parameters, else TFLite's rescaling."""
    return _concat_prepare(ctx, axis=axis)


@stack.eval
def _stack_eval(p, *xs, axis):
    a = axis % (xs[0].ndim + 1)
    xp = fp.namespace(*xs)
    return _concat_eval(p, *(xp.expand_dims(x, a) for x in xs), axis=a)


unstack = defop(
    "unstack",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "axis": Attr("int", doc="the axis taken apart (negative counts from the end)"),
        "num": Attr("int", doc="its size: the number of outputs"),
    },
    num_outputs=lambda attrs: attrs["num"],
    doc="Take a tensor apart along an axis: one output per index, the axis dropped (TFLite UNPACK).",
)


@unstack.infer
def _unstack_infer(x, *, axis, num):
    if x.rank == 0:
        fail("unstack needs an input of rank >= 1")
    a = norm_axis(axis, x.rank, "unstack")
    if x.shape[a] != num or num < 1:
        fail(f"unstack: num={num} but axis {a} of {format_shape(x.shape)} has size {x.shape[a]}")
    ch = _channel_axis(x)
    q = x.quant
    if ch is not None:
        if ch == a:
            _lost_channels("unstack", x, "is the axis taken apart")
        q = _moved(x.quant, ch - (ch > a))
    t = TensorType(x.shape[:a] + x.shape[a + 1 :], x.dtype, q)
    return tuple(t for _ in range(num))


@unstack.reference
def _unstack_ref(x, *, axis, num):
    a = axis % x.ndim
    xp = fp.namespace(x)
    return tuple(xp.take(x, i, axis=a) for i in range(num))


# mirror_pad ----------------------------------------------------------------------------
mirror_pad = defop(
    "mirror_pad",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "pads": Attr("ints", doc="(before, after) per dimension, flattened: b0, a0, b1, a1, ..."),
        "mode": Attr(
            "str", "reflect", choices=("reflect", "symmetric"), doc="reflect skips the edge, symmetric repeats it"
        ),
    },
    doc="Padding by mirroring the tensor at its edges (TFLite MIRROR_PAD, numpy pad reflect/symmetric).",
)


@mirror_pad.infer
def _mirror_pad_infer(x, *, pads, mode):
    shape = _static(x, "mirror_pad")
    if len(pads) != 2 * x.rank:
        fail(f"mirror_pad: pads {list(pads)} must have 2*rank = {2 * x.rank} entries (before, after per dimension)")
    if pads and min(pads) < 0:
        fail(f"mirror_pad: pads {list(pads)} must be non-negative")
    most = 0 if mode == "symmetric" else 1  # reflect cannot use the edge element itself
    for i, d in enumerate(shape):
        if max(pads[2 * i], pads[2 * i + 1]) > d - most:
            fail(
                f"mirror_pad: pads {pads[2 * i]}, {pads[2 * i + 1]} of dimension {i} exceed {d - most} ({mode} of {d})"
            )
    ax = _channel_axis(x)
    if ax is not None and (pads[2 * ax] or pads[2 * ax + 1]):
        _lost_channels("mirror_pad", x, "has no parameters for the padded channels")
    out = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(shape))
    return TensorType(out, x.dtype, x.quant)


@mirror_pad.reference
def _mirror_pad_ref(x, *, pads, mode):
    if x.ndim == 0:
        return x.copy()
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
    return fp.namespace(x).pad(x, pairs, mode=mode)


# space_to_depth / depth_to_space --------------------------------------------------------
space_to_depth = defop(
    "space_to_depth",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={"block_size": Attr("int", doc="side of the square block moved into the channels")},
    doc="NHWC blocks of block_size x block_size pixels into channels (TFLite SPACE_TO_DEPTH).",
)
depth_to_space = defop(
    "depth_to_space",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={"block_size": Attr("int", doc="side of the square block made of the channels")},
    doc="NHWC channels into block_size x block_size pixels, DCR order (TFLite DEPTH_TO_SPACE).",
)


@space_to_depth.infer
def _s2d_infer(x, *, block_size):
    b = block_size
    if x.rank != 4 or b < 1:
        fail(f"space_to_depth needs an NHWC input and block_size >= 1, got {format_shape(x.shape)}, {b}")
    n, h, w, c = _static(x, "space_to_depth")
    if h % b or w % b:
        fail(f"space_to_depth: height {h} and width {w} must be multiples of block_size {b}")
    return TensorType((n, h // b, w // b, c * b * b), x.dtype, _per_tensor_only("space_to_depth", x))


@space_to_depth.reference
def _s2d_ref(x, *, block_size):
    b = block_size
    n, h, w, c = x.shape
    xp = fp.namespace(x)
    y = xp.transpose(x.reshape(n, h // b, b, w // b, b, c), (0, 1, 3, 2, 4, 5))
    return y.reshape(n, h // b, w // b, b * b * c).copy()


@depth_to_space.infer
def _d2s_infer(x, *, block_size):
    b = block_size
    if x.rank != 4 or b < 1:
        fail(f"depth_to_space needs an NHWC input and block_size >= 1, got {format_shape(x.shape)}, {b}")
    n, h, w, c = _static(x, "depth_to_space")
    if c % (b * b):
        fail(f"depth_to_space: {c} channels are not a multiple of block_size**2 = {b * b}")
    return TensorType((n, h * b, w * b, c // (b * b)), x.dtype, _per_tensor_only("depth_to_space", x))


@depth_to_space.reference
def _d2s_ref(x, *, block_size):
    b = block_size
    n, h, w, c = x.shape
    xp = fp.namespace(x)
    y = xp.transpose(x.reshape(n, h, w, b, b, c // (b * b)), (0, 1, 3, 2, 4, 5))
    return y.reshape(n, h * b, w * b, c // (b * b)).copy()


# space_to_batch_nd / batch_to_space_nd ----------------------------------------------------
space_to_batch_nd = defop(
    "space_to_batch_nd",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "block_shape": Attr("ints", doc="block per spatial dimension (the dimensions after the batch)"),
        "pads": Attr("ints", doc="(before, after) per spatial dimension, flattened; padded with zero"),
    },
    # TFLite Micro pads a quantized tensor with the stored value 0, not with its zero point as
    # TFLite does (measured against the tflite-micro interpreter); the integer semantics follow it
    doc="Zero-pad the spatial dimensions, then move each block offset into the batch (TFLite SPACE_TO_BATCH_ND).",
)
batch_to_space_nd = defop(
    "batch_to_space_nd",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "block_shape": Attr("ints", doc="block per spatial dimension (the dimensions after the batch)"),
        "crops": Attr("ints", doc="(before, after) cropped per spatial dimension, flattened"),
    },
    doc="Move batch groups back into the spatial blocks, then crop (TFLite BATCH_TO_SPACE_ND).",
)


def _blocks(op: str, x: TensorType, block_shape: tuple[int, ...], edges: tuple[int, ...], what: str) -> tuple:
    shape = _static(x, op)
    m = len(block_shape)
    if m < 1 or x.rank < m + 1:
        fail(f"{op}: block_shape {list(block_shape)} needs an input of rank >= {m + 1}, got {format_shape(shape)}")
    if min(block_shape) < 1:
        fail(f"{op}: block_shape {list(block_shape)} must be positive")
    if len(edges) != 2 * m or (edges and min(edges) < 0):
        fail(f"{op}: {what} {list(edges)} must be {2 * m} non-negative entries (before, after per spatial dimension)")
    ch = _channel_axis(x)
    if ch is not None and ch <= m:
        _lost_channels(op, x, "is moved between batch and space")
    return shape


@space_to_batch_nd.infer
def _s2b_infer(x, *, block_shape, pads):
    shape = _blocks("space_to_batch_nd", x, block_shape, pads, "pads")
    spatial = []
    for i, b in enumerate(block_shape):
        d = shape[1 + i] + pads[2 * i] + pads[2 * i + 1]
        if d % b:
            fail(f"space_to_batch_nd: padded dimension {1 + i} ({d}) is not a multiple of its block {b}")
        spatial.append(d // b)
    out = (shape[0] * math.prod(block_shape), *spatial, *shape[1 + len(block_shape) :])
    return TensorType(out, x.dtype, x.quant)


@space_to_batch_nd.reference
def _s2b_ref(x, *, block_shape, pads):
    m = len(block_shape)
    xp = fp.namespace(x)
    pairs = [(0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(m)] + [(0, 0)] * (x.ndim - 1 - m)
    x = xp.pad(x, pairs, mode="constant")
    n, rest = x.shape[0], x.shape[1 + m :]
    split = [n]
    for i, b in enumerate(block_shape):
        split += [x.shape[1 + i] // b, b]
    y = x.reshape(*split, *rest)
    blocks = [2 + 2 * i for i in range(m)]
    perm = blocks + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, y.ndim))
    y = xp.transpose(y, perm)
    return y.reshape(
        n * math.prod(block_shape), *(x.shape[1 + i] // b for i, b in enumerate(block_shape)), *rest
    ).copy()


@batch_to_space_nd.infer
def _b2s_infer(x, *, block_shape, crops):
    shape = _blocks("batch_to_space_nd", x, block_shape, crops, "crops")
    k = math.prod(block_shape)
    if shape[0] % k:
        fail(f"batch_to_space_nd: batch {shape[0]} is not a multiple of the block size {k}")
    spatial = []
    for i, b in enumerate(block_shape):
        d = shape[1 + i] * b - crops[2 * i] - crops[2 * i + 1]
        if d < 0:
            fail(f"batch_to_space_nd: crops {list(crops[2 * i : 2 * i + 2])} exceed dimension {1 + i}")
        spatial.append(d)
    return TensorType((shape[0] // k, *spatial, *shape[1 + len(block_shape) :]), x.dtype, x.quant)


@batch_to_space_nd.reference
def _b2s_ref(x, *, block_shape, crops):
    m = len(block_shape)
    xp = fp.namespace(x)
    n = x.shape[0] // math.prod(block_shape)
    spatial, rest = x.shape[1 : 1 + m], x.shape[1 + m :]
    y = x.reshape(*block_shape, n, *spatial, *rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = xp.transpose(y, perm).reshape(n, *(s * b for s, b in zip(spatial, block_shape)), *rest)
    index = [slice(None)] + [
        slice(crops[2 * i], s * b - crops[2 * i + 1]) for i, (s, b) in enumerate(zip(spatial, block_shape))
    ]
    return y[tuple(index)].copy()


# broadcast_to --------------------------------------------------------------------------
broadcast_to = defop(
    "broadcast_to",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={"shape": Attr("ints", doc="the output shape; the input broadcasts to it by numpy's rules")},
    doc="Repeat a tensor along its size-1 and missing leading axes (TFLite BROADCAST_TO, numpy broadcast_to).",
)


@broadcast_to.infer
def _broadcast_to_infer(x, *, shape):
    have = _static(x, "broadcast_to")
    lead = len(shape) - len(have)
    if lead < 0 or any(d < 0 for d in shape):
        fail(f"broadcast_to: cannot broadcast {format_shape(have)} to {list(shape)}")
    for i, d in enumerate(have):
        if d not in (1, shape[lead + i]):
            fail(f"broadcast_to: dimension {i} of {format_shape(have)} ({d}) cannot become {shape[lead + i]}")
    q = x.quant
    ch = _channel_axis(x)
    if ch is not None:
        if have[ch] != shape[lead + ch]:
            _lost_channels("broadcast_to", x, "would be repeated")
        q = _moved(x.quant, ch + lead)
    return TensorType(tuple(shape), x.dtype, q)


@broadcast_to.reference
def _broadcast_to_ref(x, *, shape):
    xp = fp.namespace(x)
    return xp.array(xp.broadcast_to(x, tuple(shape)))


# gather / gather_nd ------------------------------------------------------------------------
_INDEX_DTYPES = (DType.i32, DType.i64)

gather = defop(
    "gather",
    family="layout",
    inputs=("x", "indices"),
    passthrough_quant=True,
    # a gradient needs a scatter-add, which the IR does not have
    differentiable=False,
    attrs={
        "axis": Attr("int", 0, doc="the axis indexed (negative counts from the end)"),
        "batch_dims": Attr("int", 0, doc="leading dimensions x and indices share (one gather per batch)"),
    },
    doc="Pick slices of x along an axis by integer indices (TFLite GATHER, numpy take); negatives count from the end.",
)
gather_nd = defop(
    "gather_nd",
    family="layout",
    inputs=("x", "indices"),
    passthrough_quant=True,
    differentiable=False,  # as gather
    doc="Pick slices of x by index tuples: the last axis of indices indexes x's leading axes (TFLite GATHER_ND).",
)


def _index_type(op: str, indices: TensorType) -> None:
    if indices.dtype not in _INDEX_DTYPES or indices.quant is not None:
        fail(f"{op}: indices must be int32 or int64 (not quantized), got {indices.dtype}")


def _batch_dims(batch_dims: int, rank: int) -> int:
    return batch_dims + rank if batch_dims < 0 else batch_dims


@gather.infer
def _gather_infer(x, indices, *, axis, batch_dims):
    _index_type("gather", indices)
    if x.rank == 0:
        fail("gather needs an input of rank >= 1")
    a = norm_axis(axis, x.rank, "gather")
    bd = _batch_dims(batch_dims, indices.rank)
    if not 0 <= bd <= min(a, indices.rank):
        fail(f"gather: batch_dims {batch_dims} must be in [0, {min(a, indices.rank)}] for axis {a}")
    if x.shape[:bd] != indices.shape[:bd]:
        fail(
            f"gather: the batch dimensions of {format_shape(x.shape)} and indices {format_shape(indices.shape)} differ"
        )
    q = x.quant
    ch = _channel_axis(x)
    if ch is not None:
        if ch == a:
            _lost_channels("gather", x, "is the axis gathered")
        q = q if ch < a else _moved(x.quant, ch + indices.rank - bd - 1)
    return TensorType(x.shape[:a] + indices.shape[bd:] + x.shape[a + 1 :], x.dtype, q)


def _check_range(indices, n: int, op: str, where: str) -> None:
    """Indices in [-n, n): numpy raises for others; a traced (JAX) gather cannot, and clamps."""
    if isinstance(indices, np.ndarray) and indices.size and (indices.min() < -n or indices.max() >= n):
        bad = int(indices[(indices < -n) | (indices >= n)].reshape(-1)[0])
        raise OpError(f"{op}: index {bad} is out of range for {where} of size {n}")


@gather.reference
def _gather_ref(x, indices, *, axis, batch_dims):
    xp = fp.namespace(x, indices)
    a = axis % x.ndim
    bd = _batch_dims(batch_dims, indices.ndim)
    _check_range(indices, x.shape[a], "gather", f"axis {a}")
    if bd == 0:
        return xp.take(x, indices, axis=a)
    lead = x.shape[:bd]
    xb = x.reshape((-1, *x.shape[bd:]))
    ib = indices.reshape((-1, *indices.shape[bd:]))
    out = xp.stack([xp.take(xb[b], ib[b], axis=a - bd) for b in range(xb.shape[0])])
    return out.reshape((*lead, *out.shape[1:]))


@gather_nd.infer
def _gather_nd_infer(x, indices):
    _index_type("gather_nd", indices)
    if indices.rank < 1:
        fail("gather_nd: indices need rank >= 1 (the last axis holds the index tuples)")
    k = indices.shape[-1]
    if not isinstance(k, int) or not 1 <= k <= x.rank:
        fail(f"gather_nd: index tuples of length {k} do not index {format_shape(x.shape)}")
    q = x.quant
    ch = _channel_axis(x)
    if ch is not None:
        if ch < k:
            _lost_channels("gather_nd", x, "is indexed")
        q = _moved(x.quant, ch - k + indices.rank - 1)
    return TensorType(indices.shape[:-1] + x.shape[k:], x.dtype, q)


@gather_nd.reference
def _gather_nd_ref(x, indices):
    k = indices.shape[-1]
    for j in range(k):
        _check_range(indices[..., j], x.shape[j], "gather_nd", f"dimension {j}")
    return x[tuple(indices[..., j] for j in range(k))]


# integer semantics: the same data movement on stored integers (module docstring)
def _moves(op) -> None:
    ref = op._reference

    @op.eval
    def _eval(p, *xs, **attrs):
        return ref(*xs, **attrs)


for _op in (
    unstack, mirror_pad, space_to_depth, depth_to_space, space_to_batch_nd, batch_to_space_nd, broadcast_to, gather,
    gather_nd,
):  # fmt: skip
    _moves(_op)


# derivatives -------------------------------------------------------------------------------
# Every op here is linear: a tangent goes through the op itself; a cotangent goes back
# through the op that returns each element where it came from (summing repeats).
def _self_jvp(op) -> None:
    @op.jvp
    def _jvp(e, primals, outputs, tangents, **attrs):
        got = e.op(op.name, tangents[0], **attrs)
        return list(got) if isinstance(got, tuple) else [got]


for _op in (unstack, mirror_pad, space_to_depth, depth_to_space, batch_to_space_nd, space_to_batch_nd, broadcast_to):
    _self_jvp(_op)


@stack.jvp
def _stack_jvp(e, primals, outputs, tangents, *, axis):
    return [e.stack(*(e.zeros(x) if t is None else t for x, t in zip(primals, tangents)), axis=axis)]


@stack.vjp
def _stack_vjp(e, primals, outputs, cotangents, *, axis):
    rank = len(e.static_shape(cotangents[0]))
    got = e.unstack(cotangents[0], axis=axis % rank, num=len(primals))
    return list(got) if isinstance(got, tuple) else [got]


@unstack.vjp
def _unstack_vjp(e, primals, outputs, cotangents, *, axis, num):
    parts = [e.zeros(y) if c is None else c for y, c in zip(outputs, cotangents)]
    return [e.stack(*parts, axis=axis % len(e.static_shape(primals[0])))]


@space_to_depth.vjp
def _s2d_vjp(e, primals, outputs, cotangents, *, block_size):
    return [e.depth_to_space(cotangents[0], block_size=block_size)]


@depth_to_space.vjp
def _d2s_vjp(e, primals, outputs, cotangents, *, block_size):
    return [e.space_to_depth(cotangents[0], block_size=block_size)]


@space_to_batch_nd.vjp
def _s2b_vjp(e, primals, outputs, cotangents, *, block_shape, pads):
    return [e.batch_to_space_nd(cotangents[0], block_shape=block_shape, crops=pads)]


@batch_to_space_nd.vjp
def _b2s_vjp(e, primals, outputs, cotangents, *, block_shape, crops):
    return [e.space_to_batch_nd(cotangents[0], block_shape=block_shape, pads=crops)]


@broadcast_to.vjp
def _broadcast_to_vjp(e, primals, outputs, cotangents, *, shape):
    return [e.sum_to(cotangents[0], e.static_shape(primals[0]))]


def _axis_slice(e, t, axis: int, lo: int, hi: int, backwards: bool):
    """t[..., lo:hi, ...] along ``axis``, or the same elements in reverse order."""
    shape = e.static_shape(t)
    begin, end, strides = [0] * len(shape), list(shape), [1] * len(shape)
    begin[axis], end[axis] = (hi - 1, lo - 1 if lo else -_OPEN - 1) if backwards else (lo, hi)
    strides[axis] = -1 if backwards else 1
    return e.slice(t, begin=tuple(begin), end=tuple(end), strides=tuple(strides))


def _axis_pad(e, t, axis: int, before: int, after: int):
    pads = [0] * (2 * len(e.static_shape(t)))
    pads[2 * axis], pads[2 * axis + 1] = before, after
    return e.pad(t, pads=tuple(pads))


@mirror_pad.vjp
def _mirror_pad_vjp(e, primals, outputs, cotangents, *, pads, mode):
    """Axis by axis: the centre, plus each padded edge reversed and added where it was mirrored from."""
    ct = cotangents[0]
    skip = 1 if mode == "reflect" else 0
    for i, d in enumerate(e.static_shape(primals[0])):
        before, after = pads[2 * i], pads[2 * i + 1]
        if not (before or after):
            continue
        total = _axis_slice(e, ct, i, before, before + d, False)
        if before:  # output index before - 1 - k mirrors input index skip + k
            edge = _axis_slice(e, ct, i, 0, before, True)
            total = e.add(total, _axis_pad(e, edge, i, skip, d - skip - before))
        if after:  # output index before + d + k mirrors input index d - 1 - skip - k
            edge = _axis_slice(e, ct, i, before + d, before + d + after, True)
            total = e.add(total, _axis_pad(e, edge, i, d - skip - after, skip))
        ct = total
    return [ct]


# samplers -------------------------------------------------------------------------------
@stack.sample
def _stack_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 4)))
    axis = _maybe_negative(rng, int(rng.integers(len(shape) + 1)), len(shape) + 1)
    n = int(rng.integers(1, 4))
    if rng.random() < 0.15:
        drawn = [_int16_draw(rng, shape) for _ in range(n)]
        q = drawn[0][1]
        return [d[0] for d in drawn], {"axis": axis}, [q], [q] * n
    dt = _SAMPLE_DTYPES[int(rng.integers(len(_SAMPLE_DTYPES)))]
    return [_tensor_of(rng, shape, dt) for _ in range(n)], {"axis": axis}


def _single(x: np.ndarray, q: QuantParams | None, attrs: dict, outs: int = 1) -> tuple:
    return ([x], attrs) if q is None else ([x], attrs, [q] * outs, [q])


@unstack.sample
def _unstack_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    axis = int(rng.integers(len(shape)))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"axis": _maybe_negative(rng, axis, len(shape)), "num": shape[axis]}, shape[axis])


@mirror_pad.sample
def _mirror_pad_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    mode = str(rng.choice(["reflect", "symmetric"]))
    most = 0 if mode == "symmetric" else 1
    pads = tuple(int(rng.integers(0, d - most + 1)) for d in shape for _ in range(2))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"pads": pads, "mode": mode})


@space_to_depth.sample
def _s2d_sample(rng):
    b = int(rng.integers(1, 4))
    shape = (int(rng.integers(1, 3)), b * int(rng.integers(1, 4)), b * int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"block_size": b})


@depth_to_space.sample
def _d2s_sample(rng):
    b = int(rng.integers(1, 4))
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4)), b * b * int(rng.integers(1, 3)))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"block_size": b})


@space_to_batch_nd.sample
def _s2b_sample(rng):
    m = int(rng.integers(1, 3))
    blocks = tuple(int(rng.integers(1, 4)) for _ in range(m))
    pads, spatial = [], []
    for b in blocks:
        before = int(rng.integers(0, 3))
        size = int(rng.integers(1, 6))
        after = (-(size + before)) % b + b * int(rng.integers(0, 2))
        pads += [before, after]
        spatial.append(size)
    shape = (int(rng.integers(1, 3)), *spatial, *rand_shape(rng, int(rng.integers(0, 2)), hi=3))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"block_shape": blocks, "pads": tuple(pads)})


@batch_to_space_nd.sample
def _b2s_sample(rng):
    m = int(rng.integers(1, 3))
    blocks = tuple(int(rng.integers(1, 4)) for _ in range(m))
    spatial = [int(rng.integers(1, 4)) for _ in range(m)]
    crops = []
    for b, s in zip(blocks, spatial):
        total = int(rng.integers(0, s * b))  # leave at least one element
        before = int(rng.integers(0, total + 1))
        crops += [before, total - before]
    shape = (int(rng.integers(1, 3)) * math.prod(blocks), *spatial, *rand_shape(rng, int(rng.integers(0, 2)), hi=3))
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"block_shape": blocks, "crops": tuple(crops)})


@broadcast_to.sample
def _broadcast_to_sample(rng):
    target = rand_shape(rng, int(rng.integers(1, 5)))
    rank = int(rng.integers(0, len(target) + 1))
    have = tuple(1 if rng.random() < 0.5 else d for d in target[len(target) - rank :])
    x, q = _draw_x(rng, have)
    return _single(x, q, {"shape": tuple(target)})


def _indices(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> np.ndarray:
    """Valid indices into a dimension of ``n``, now and then counted from the end."""
    idx = rng.integers(0, n, shape)
    idx = np.where(rng.random(shape) < 0.2, idx - n, idx)
    return np.asarray(idx, dtype=np.int32 if rng.random() < 0.7 else np.int64)


@gather.sample
def _gather_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    axis = int(rng.integers(len(shape)))
    bd = int(rng.integers(0, axis + 1)) if rng.random() < 0.3 else 0
    idx_shape = shape[:bd] + rand_shape(rng, int(rng.integers(0, 3)))
    x, q = _draw_x(rng, shape)
    attrs = {"axis": _maybe_negative(rng, axis, len(shape)), "batch_dims": bd}
    idx = _indices(rng, idx_shape, shape[axis])
    return ([x, idx], attrs) if q is None else ([x, idx], attrs, [q], [q, None])


@gather_nd.sample
def _gather_nd_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    k = int(rng.integers(1, len(shape) + 1))
    lead = rand_shape(rng, int(rng.integers(0, 3)))
    idx = np.stack([_indices(rng, lead, shape[j]).astype(np.int32) for j in range(k)], axis=-1)
    x, q = _draw_x(rng, shape)
    return ([x, idx], {}) if q is None else ([x, idx], {}, [q], [q, None])
