"""Layout ops: they move, select or pad elements but never change a value.

Every op here accepts any dtype (float, integer, quantized) and returns the
input dtype. Quantization parameters pass through; a per-channel axis follows
its dimension (and its scales are sliced, split or concatenated with it) or
the op is rejected with a clear error when the channels would not survive.
"""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, fail, norm_axes, norm_axis, rand_float, rand_shape
from rlx_edge.ir.ops._quantized import clamp_cast, quantize_bound, scalar_params, storage_range
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.shape import Dim, format_shape, is_static
from rlx_edge.ir.types import QuantParams, TensorType

# An end at or beyond this (or a begin at or below its negative) means "to the
# end" even for a symbolic dimension; ONNX and TFLite exporters write INT_MAX.
_OPEN = 2**31 - 1


# quantization through layout changes ------------------------------------------------
def _channel_axis(x: TensorType) -> int | None:
    """The per-channel quantization axis of ``x`` in [0, rank), or None."""
    if x.quant is None or not x.quant.per_channel:
        return None
    return x.quant.axis % x.rank


def _moved(q: QuantParams, axis: int) -> QuantParams:
    return QuantParams(q.scale, q.zero_point, axis, q.storage)


def _sliced(q: QuantParams, axis: int, index) -> QuantParams:
    return QuantParams(q.scale[index], q.zero_point[index], axis, q.storage)


def _lost_channels(op: str, x: TensorType, why: str) -> None:
    fail(f"{op}: per-channel quantization along axis {_channel_axis(x)} of {format_shape(x.shape)} {why}")


# reshape --------------------------------------------------------------------------
reshape = defop(
    "reshape",
    family="layout",
    inputs=("x",),
    view=True,
    attrs={"shape": Attr("ints", doc="target shape; one entry may be -1 (inferred); 0 means size 0")},
    doc="Reshape (a view: no data moves). 0 is a literal size, not 'copy the input dimension'.",
)


def _reshape_target(shape_in: tuple[Dim, ...], target: tuple[int, ...]) -> tuple[Dim, ...]:
    holes = [i for i, d in enumerate(target) if d == -1]
    if len(holes) > 1:
        fail(f"reshape: target {list(target)} has more than one -1")
    if any(d < -1 for d in target):
        fail(f"reshape: target {list(target)} has a negative size other than -1")
    known = math.prod(d for d in target if d != -1)
    if not is_static(shape_in):
        # Only a symbolic leading (batch) dimension carried by a leading -1 can be
        # followed: the output keeps the symbol when the remaining sizes agree.
        lead, rest = shape_in[0], shape_in[1:]
        if not (isinstance(lead, str) and is_static(rest) and holes == [0]):
            fail(
                f"reshape of symbolic shape {format_shape(shape_in)} to {list(target)}: only a symbolic leading"
                " dimension with a leading -1 in the target is supported; bind the symbols first"
            )
        have = math.prod(rest)
        if have != known:
            fail(
                f"reshape: {format_shape(shape_in)} to {list(target)} would make the leading dimension"
                f" {lead}*{have}/{known}, which is not the symbol {lead}; bind the symbols first"
            )
        return (lead, *target[1:])
    total = math.prod(shape_in)
    if not holes:
        if known != total:
            fail(f"reshape: cannot reshape {format_shape(shape_in)} ({total} elements) to {list(target)} ({known})")
        return tuple(target)
    if known == 0 or total % known:
        fail(f"reshape: cannot reshape {format_shape(shape_in)} ({total} elements) to {list(target)}")
    return tuple(total // known if d == -1 else d for d in target)


def _reshape_quant(x: TensorType, out: tuple[Dim, ...]) -> QuantParams | None:
    ax = _channel_axis(x)
    if ax is None:
        return x.quant
    # The channel index of every element survives when the channel dimension
    # reappears whole, with the same number of elements before it.
    if is_static(x.shape) and is_static(out):
        before = math.prod(x.shape[:ax])
        for j, d in enumerate(out):
            if d == x.shape[ax] and math.prod(out[:j]) == before:
                return _moved(x.quant, j)
    _lost_channels("reshape", x, f"does not survive reshape to {format_shape(out)}")
    return None


@reshape.infer
def _reshape_infer(x, *, shape):
    out = _reshape_target(x.shape, shape)
    return TensorType(out, x.dtype, _reshape_quant(x, out))


@reshape.reference
def _reshape_ref(x, *, shape):
    return x.reshape(shape)


# transpose ------------------------------------------------------------------------
transpose = defop(
    "transpose",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={"perm": Attr("ints", doc="output axis i is input axis perm[i]")},
    doc="Permute axes: out.shape[i] = x.shape[perm[i]].",
)


@transpose.infer
def _transpose_infer(x, *, perm):
    if sorted(perm) != list(range(x.rank)):
        fail(f"transpose: perm {list(perm)} is not a permutation of 0..{x.rank - 1} (input rank {x.rank})")
    ax = _channel_axis(x)
    q = x.quant if ax is None else _moved(x.quant, perm.index(ax))
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype, q)


@transpose.reference
def _transpose_ref(x, *, perm):
    return np.transpose(x, perm).copy()


# concat ---------------------------------------------------------------------------
concat = defop(
    "concat",
    family="layout",
    inputs=("*xs",),
    attrs={"axis": Attr("int", doc="joined axis (negative counts from the end)")},
    doc="Join tensors along an existing axis.",
)


@concat.infer
def _concat_infer(*xs, axis):
    first = xs[0]
    if first.rank == 0:
        fail("concat needs inputs of rank >= 1")
    a = norm_axis(axis, first.rank, "concat")
    for i, t in enumerate(xs[1:], 1):
        if t.rank != first.rank:
            fail(f"concat: input {i} has rank {t.rank} but input 0 has rank {first.rank}")
        if t.dtype != first.dtype:
            fail(f"concat: input {i} is {t.dtype} but input 0 is {first.dtype}; concat does not convert")
    out: list[Dim] = []
    for d in range(first.rank):
        dims = [t.shape[d] for t in xs]
        if d == a:
            if not all(isinstance(v, int) for v in dims):
                fail(f"concat: joined axis {a} must be static in every input, got {dims}")
            out.append(sum(dims))  # type: ignore[arg-type]
            continue
        statics = {v for v in dims if isinstance(v, int)}
        symbols = {v for v in dims if isinstance(v, str)}
        if len(statics) > 1 or len(symbols) > 1:
            fail(f"concat: dimension {d} differs between inputs: {dims}")
        # a static size pins down a symbol it meets
        out.append(statics.pop() if statics else symbols.pop())
    return TensorType(tuple(out), first.dtype, _concat_quant(xs, a))


def _concat_quant(xs: tuple[TensorType, ...], axis: int) -> QuantParams | None:
    qs = [t.quant for t in xs]
    if any(q is None for q in qs):
        return None
    axes = {_channel_axis(t) for t in xs}
    if axes == {axis}:
        # per-channel along the joined axis: the channels are joined too
        q0 = qs[0]
        scale = np.concatenate([q.scale for q in qs])
        zp = np.concatenate([q.zero_point for q in qs])
        return QuantParams(scale, zp, axis, q0.storage)
    if all(q == qs[0] for q in qs[1:]):
        return qs[0]
    # inputs on different scales: the output's parameters are the caller's choice (out_quant)
    return None


@concat.reference
def _concat_ref(*xs, axis):
    return np.concatenate(xs, axis=axis)


# split ----------------------------------------------------------------------------
split = defop(
    "split",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "axis": Attr("int", doc="split axis (negative counts from the end)"),
        "sizes": Attr("ints", doc="size of each output along the axis; they must add up to the dimension"),
    },
    num_outputs=lambda attrs: len(attrs["sizes"]),
    doc="Cut a tensor along an axis into pieces of the given sizes.",
)


@split.infer
def _split_infer(x, *, axis, sizes):
    if x.rank == 0:
        fail("split needs an input of rank >= 1")
    a = norm_axis(axis, x.rank, "split")
    if not sizes:
        fail("split: sizes must have at least one entry")
    if min(sizes) < 0:
        fail(f"split: sizes {list(sizes)} must be non-negative")
    dim = x.shape[a]
    if isinstance(dim, str):
        fail(f"split: axis {a} is the symbol {dim!r} but must be static; bind it first")
    if sum(sizes) != dim:
        fail(f"split: sizes {list(sizes)} add up to {sum(sizes)}, but axis {a} of {format_shape(x.shape)} is {dim}")
    ax = _channel_axis(x)
    outs = []
    start = 0
    for s in sizes:
        q = x.quant if ax != a else _sliced(x.quant, a, slice(start, start + s))
        outs.append(TensorType(x.shape[:a] + (s,) + x.shape[a + 1 :], x.dtype, q))
        start += s
    return tuple(outs)


@split.reference
def _split_ref(x, *, axis, sizes):
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


# slice ----------------------------------------------------------------------------
slice_ = defop(
    "slice",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "begin": Attr("ints", doc="start per dimension; negatives count from the end; clamped like numpy"),
        "end": Attr("ints", doc="stop per dimension (exclusive); negatives count from the end; clamped"),
        "strides": Attr("ints?", None, doc="step per dimension (negative walks backwards); None means all 1"),
    },
    doc="Strided slice with numpy semantics: x[b0:e0:s0, b1:e1:s1, ...].",
)


def _slice_dim(d: Dim, b: int, e: int, s: int, i: int) -> Dim:
    if isinstance(d, int):
        return len(range(*slice(b, e, s).indices(d)))
    # Only "the whole axis" is known for a symbol: forwards from the start, or backwards from the end.
    if s == 1 and (b == 0 or b <= -_OPEN) and e >= _OPEN:
        return d
    if s == -1 and (b == -1 or b >= _OPEN) and e <= -_OPEN:
        return d
    fail(f"slice: dimension {i} is the symbol {d!r}; only a full slice of it is supported, bind it first")
    return d


@slice_.infer
def _slice_infer(x, *, begin, end, strides):
    strides = strides if strides is not None else (1,) * x.rank
    for name, v in (("begin", begin), ("end", end), ("strides", strides)):
        if len(v) != x.rank:
            fail(f"slice: {name} {list(v)} needs one entry per dimension of {format_shape(x.shape)}")
    if 0 in strides:
        fail(f"slice: strides {list(strides)} must not contain 0")
    out = tuple(_slice_dim(d, b, e, s, i) for i, (d, b, e, s) in enumerate(zip(x.shape, begin, end, strides)))
    q = x.quant
    ax = _channel_axis(x)
    if ax is not None:
        q = _sliced(x.quant, ax, slice(begin[ax], end[ax], strides[ax]))
    return TensorType(out, x.dtype, q)


@slice_.reference
def _slice_ref(x, *, begin, end, strides):
    strides = strides if strides is not None else (1,) * x.ndim
    # asarray: indexing a rank-0 array with () gives a scalar, not an array
    return np.asarray(x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]).copy()


# pad ------------------------------------------------------------------------------
pad = defop(
    "pad",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    attrs={
        "pads": Attr("ints", doc="(before, after) per dimension, flattened: b0, a0, b1, a1, ..."),
        "value": Attr("float", 0.0, doc="fill value; a real value for quantized tensors (0.0 is the zero point)"),
    },
    doc="Constant padding.",
)


@pad.infer
def _pad_infer(x, *, pads, value):
    if len(pads) != 2 * x.rank:
        fail(f"pad: pads {list(pads)} must have 2*rank = {2 * x.rank} entries (before, after per dimension)")
    if pads and min(pads) < 0:
        fail(f"pad: pads {list(pads)} must be non-negative")
    if x.dtype.is_int and x.quant is None:
        if value != int(value) or not x.dtype.min <= value <= x.dtype.max:
            fail(f"pad: value {value} is not representable in {x.dtype}")
    out: list[Dim] = []
    for i, d in enumerate(x.shape):
        b, a = pads[2 * i], pads[2 * i + 1]
        if isinstance(d, str) and (a or b):
            fail(f"pad: dimension {i} is the symbol {d!r} and cannot be padded; bind it first")
        out.append(d if isinstance(d, str) else d + a + b)
    ax = _channel_axis(x)
    if ax is not None and (pads[2 * ax] or pads[2 * ax + 1]):
        _lost_channels("pad", x, "has no parameters for the padded channels")
    return TensorType(tuple(out), x.dtype, x.quant)


@pad.reference
def _pad_ref(x, *, pads, value):
    if x.ndim == 0:
        return x.copy()  # np.pad rejects an empty pad_width
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
    fill = value if x.dtype.kind == "f" else int(value)
    return np.pad(x, pairs, mode="constant", constant_values=fill)


# squeeze / unsqueeze ----------------------------------------------------------------
squeeze = defop(
    "squeeze",
    family="layout",
    inputs=("x",),
    view=True,
    attrs={"axes": Attr("ints", doc="size-1 axes to drop (negative counts from the end)")},
    doc="Drop size-1 axes (a view: no data moves).",
)


@squeeze.infer
def _squeeze_infer(x, *, axes):
    ax = norm_axes(axes, x.rank, "squeeze")
    for a in ax:
        if x.shape[a] != 1:
            fail(f"squeeze: axis {a} of {format_shape(x.shape)} has size {x.shape[a]}, not 1")
    ch = _channel_axis(x)
    q = x.quant
    if ch is not None:
        if ch in ax:
            _lost_channels("squeeze", x, "would be squeezed away")
        q = _moved(x.quant, ch - sum(1 for a in ax if a < ch))
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in ax), x.dtype, q)


@squeeze.reference
def _squeeze_ref(x, *, axes):
    return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))


unsqueeze = defop(
    "unsqueeze",
    family="layout",
    inputs=("x",),
    view=True,
    attrs={"axes": Attr("ints", doc="positions of the new size-1 axes in the output (negative counts from the end)")},
    doc="Insert size-1 axes (a view: no data moves).",
)


@unsqueeze.infer
def _unsqueeze_infer(x, *, axes):
    rank = x.rank + len(axes)
    ax = norm_axes(axes, rank, "unsqueeze")
    rest = iter(x.shape)
    out = tuple(1 if i in ax else next(rest) for i in range(rank))
    q = x.quant
    ch = _channel_axis(x)
    if ch is not None:
        kept = [i for i in range(rank) if i not in ax]
        q = _moved(x.quant, kept[ch])
    return TensorType(out, x.dtype, q)


@unsqueeze.reference
def _unsqueeze_ref(x, *, axes):
    return np.expand_dims(x, axis=tuple(a % (x.ndim + len(axes)) for a in axes))


# derivatives ------------------------------------------------------------------------
# Every layout op is linear: a tangent goes through the op itself; a cotangent goes
# back through the op that puts each element where it came from (zeros elsewhere).
def _linear_jvp(op) -> None:
    @op.jvp
    def _jvp(e, primals, outputs, tangents, **attrs):
        return [e.op(op.name, tangents[0], **attrs)]


def _reshape_back_vjp(op) -> None:
    @op.vjp
    def _vjp(e, primals, outputs, cotangents, **attrs):
        return [e.reshape(cotangents[0], shape=e.static_shape(primals[0]))]


for _op in (reshape, squeeze, unsqueeze, transpose, slice_):
    _linear_jvp(_op)
for _op in (reshape, squeeze, unsqueeze):
    _reshape_back_vjp(_op)


@transpose.vjp
def _transpose_vjp(e, primals, outputs, cotangents, *, perm):
    return [e.transpose(cotangents[0], perm=tuple(int(i) for i in np.argsort(perm)))]


@pad.jvp
def _pad_jvp(e, primals, outputs, tangents, *, pads, value):
    return [e.pad(tangents[0], pads=pads)]  # the fill is a constant: its tangent is 0


@pad.vjp
def _pad_vjp(e, primals, outputs, cotangents, *, pads, value):
    shape = e.static_shape(primals[0])
    begin = tuple(pads[0::2])
    return [e.slice(cotangents[0], begin=begin, end=tuple(b + d for b, d in zip(begin, shape)))]


@concat.jvp
def _concat_jvp(e, primals, outputs, tangents, *, axis):
    return [e.concat(*(e.zeros(x) if t is None else t for x, t in zip(primals, tangents)), axis=axis)]


@concat.vjp
def _concat_vjp(e, primals, outputs, cotangents, *, axis):
    ct = cotangents[0]
    rank = len(e.static_shape(ct))
    a = norm_axis(axis, rank, "concat")
    out, start = [], 0
    for x in primals:
        n = e.static_shape(x)[a]
        begin, end = [0] * rank, list(e.static_shape(ct))
        begin[a], end[a] = start, start + n
        out.append(e.slice(ct, begin=tuple(begin), end=tuple(end)))
        start += n
    return out


@split.jvp
def _split_jvp(e, primals, outputs, tangents, *, axis, sizes):
    got = e.split(tangents[0], axis=axis, sizes=sizes)
    return list(got) if isinstance(got, tuple) else [got]


@split.vjp
def _split_vjp(e, primals, outputs, cotangents, *, axis, sizes):
    parts = [e.zeros(y) if c is None else c for y, c in zip(outputs, cotangents)]
    return [e.concat(*parts, axis=axis)]


@slice_.vjp
def _slice_vjp(e, primals, outputs, cotangents, *, begin, end, strides):
    """Put each element back at its index: reverse the axes walked backwards, spread the strided ones
    (zeros between), pad to the input's extent."""
    x, ct = primals[0], cotangents[0]
    shape = e.static_shape(x)
    strides = strides if strides is not None else (1,) * len(shape)
    picked = [range(*slice(b, en, st).indices(d)) for b, en, st, d in zip(begin, end, strides, shape)]
    if not shape:
        return [ct]
    if any(len(r) == 0 for r in picked):
        return [e.zeros(x)]
    back = [i for i, st in enumerate(strides) if st < 0]
    if back:
        rev = [-1 if i in back else 1 for i in range(len(shape))]
        ct = e.slice(ct, begin=tuple(-1 if s < 0 else 0 for s in rev),
                     end=tuple(-_OPEN - 1 if s < 0 else _OPEN for s in rev), strides=tuple(rev))  # fmt: skip
    pads = []
    for i, (r, d) in enumerate(zip(picked, shape)):
        step = abs(r.step)
        ct = e.interior_pad(ct, i, step)
        first = min(r[0], r[-1])
        pads += [first, d - (first + (len(r) - 1) * step + 1)]
    return [e.pad(ct, pads=tuple(pads)) if any(pads) else ct]


# vmap: the batch axis goes first; attributes naming axes move up by one
@reshape.batch
def _reshape_batch(e, inputs, batched, *, shape):
    b, *rest = e.static_shape(inputs[0])
    return [e.reshape(inputs[0], shape=(b, *_reshape_target(tuple(rest), shape)))]


@transpose.batch
def _transpose_batch(e, inputs, batched, *, perm):
    return [e.transpose(inputs[0], perm=(0, *(p + 1 for p in perm)))]


@squeeze.batch
def _squeeze_batch(e, inputs, batched, *, axes):
    rank = len(inputs[0].shape) - 1
    return [e.squeeze(inputs[0], axes=tuple(a % rank + 1 for a in axes))]


@unsqueeze.batch
def _unsqueeze_batch(e, inputs, batched, *, axes):
    rank = len(inputs[0].shape) - 1 + len(axes)
    return [e.unsqueeze(inputs[0], axes=tuple(a % rank + 1 for a in axes))]


@slice_.batch
def _slice_batch(e, inputs, batched, *, begin, end, strides):
    strides = strides if strides is not None else (1,) * len(begin)
    return [e.slice(inputs[0], begin=(0, *begin), end=(_OPEN, *end), strides=(1, *strides))]


@pad.batch
def _pad_batch(e, inputs, batched, *, pads, value):
    return [e.pad(inputs[0], pads=(0, 0, *pads), value=value)]


@concat.batch
def _concat_batch(e, inputs, batched, *, axis):
    size = next(e.static_shape(x)[0] for x, b in zip(inputs, batched) if b)
    xs = [x if b else e.broadcast_to(x, (size, *e.static_shape(x))) for x, b in zip(inputs, batched)]
    return [e.concat(*xs, axis=axis % (len(xs[0].shape) - 1) + 1)]


@split.batch
def _split_batch(e, inputs, batched, *, axis, sizes):
    got = e.split(inputs[0], axis=axis % (len(inputs[0].shape) - 1) + 1, sizes=sizes)
    return list(got) if isinstance(got, tuple) else [got]


# samplers -------------------------------------------------------------------------
_SAMPLE_DTYPES = (*FLOAT_SAMPLE_DTYPES, np.int8, np.int32)


def _rand_tensor(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    dt = _SAMPLE_DTYPES[int(rng.integers(len(_SAMPLE_DTYPES)))]
    return _tensor_of(rng, shape, dt)


def _tensor_of(rng: np.random.Generator, shape: tuple[int, ...], dt) -> np.ndarray:
    # asarray: rank-0 draws come back as numpy scalars
    if np.dtype(dt).kind == "i":
        return np.asarray(rng.integers(-128, 128, shape), dtype=dt)
    return np.asarray(rand_float(rng, shape, dt))


def _maybe_negative(rng: np.random.Generator, axis: int, rank: int) -> int:
    return axis - rank if rng.random() < 0.4 else axis


@reshape.sample
def _reshape_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    x = _rand_tensor(rng, shape)
    # regroup the prime factors of the element count into a new shape
    factors: list[int] = []
    n = x.size
    p = 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    rng.shuffle(factors)
    target = [1] * int(rng.integers(1, 5))
    for f in factors:
        target[int(rng.integers(len(target)))] *= f
    if rng.random() < 0.2:
        target.insert(int(rng.integers(len(target) + 1)), 1)
    if rng.random() < 0.5:
        target[int(rng.integers(len(target)))] = -1
    return [x], {"shape": tuple(target)}


@transpose.sample
def _transpose_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 6)))
    return [_rand_tensor(rng, shape)], {"perm": tuple(int(p) for p in rng.permutation(len(shape)))}


@concat.sample
def _concat_sample(rng):
    rank = int(rng.integers(1, 5))
    base = list(rand_shape(rng, rank))
    axis = int(rng.integers(rank))
    dt = _SAMPLE_DTYPES[int(rng.integers(len(_SAMPLE_DTYPES)))]
    xs = []
    for _ in range(int(rng.integers(1, 5))):
        base[axis] = int(rng.integers(0 if rng.random() < 0.1 else 1, 4))
        xs.append(_tensor_of(rng, tuple(base), dt))
    return xs, {"axis": _maybe_negative(rng, axis, rank)}


@split.sample
def _split_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)), hi=7)
    axis = int(rng.integers(len(shape)))
    cuts = np.sort(rng.integers(0, shape[axis] + 1, int(rng.integers(0, 4))))
    sizes = tuple(int(s) for s in np.diff(np.concatenate([[0], cuts, [shape[axis]]])))
    return [_rand_tensor(rng, shape)], {"axis": _maybe_negative(rng, axis, len(shape)), "sizes": sizes}


@slice_.sample
def _slice_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 5)), hi=7)
    begin, end, strides = [], [], []
    for d in shape:
        # out-of-range and negative bounds are clamped or counted from the end, like numpy
        begin.append(int(rng.integers(-d - 2, d + 3)))
        end.append(int(rng.choice([int(rng.integers(-d - 2, d + 3)), _OPEN, -_OPEN - 1])))
        strides.append(int(rng.choice([1, 1, 2, 3, -1, -2])))
    attrs = {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides)}
    if rng.random() < 0.2:
        attrs["strides"] = None
    elif rng.random() < 0.2:
        attrs = _reversal(rng, shape)
    return [_rand_tensor(rng, shape)], attrs


def _reversal(rng: np.random.Generator, shape: tuple[int, ...]) -> dict:
    """Whole axes, some walked backwards, in the ways a bound can say it (TFLite's REVERSE_V2)."""
    begin, end, strides = [], [], []
    for d in shape:
        if rng.random() < 0.5:
            begin.append(int(rng.choice([-1, d - 1, _OPEN])))
            end.append(int(rng.choice([-_OPEN - 1, -d - 1])))
            strides.append(-1)
        else:
            begin.append(int(rng.choice([0, -d, -_OPEN - 1])))
            end.append(int(rng.choice([d, _OPEN])))
            strides.append(1)
    return {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides)}


@pad.sample
def _pad_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    x = _rand_tensor(rng, shape)
    pads = tuple(int(p) for p in rng.integers(0, 3, 2 * len(shape)))
    value = float(rng.integers(-5, 6)) if x.dtype.kind == "i" else float(rng.choice([0.0, -1.5, 3.25]))
    return [x], {"pads": pads, "value": value}


@squeeze.sample
def _squeeze_sample(rng):
    shape = list(rand_shape(rng, int(rng.integers(1, 5))))
    k = int(rng.integers(1, len(shape) + 1))
    axes = [int(a) for a in rng.permutation(len(shape))[:k]]
    for a in axes:
        shape[a] = 1
    axes = [_maybe_negative(rng, a, len(shape)) for a in axes]
    return [_rand_tensor(rng, tuple(shape))], {"axes": tuple(axes)}


@unsqueeze.sample
def _unsqueeze_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 4)))
    k = int(rng.integers(1, 3))
    rank = len(shape) + k
    axes = [_maybe_negative(rng, int(a), rank) for a in rng.permutation(rank)[:k]]
    return [_rand_tensor(rng, shape)], {"axes": tuple(axes)}


# integer semantics ------------------------------------------------------------------
# Data movement is the same on stored integers: quantized reshape, transpose,
# split, slice, squeeze and unsqueeze copy values unchanged (TFLite Micro
# copies bytes too), so their eval is the float reference and they prepare
# nothing. Concat and pad read the quantization parameters, once, in prepare.
def _int_data_movement(op) -> None:
    ref = op._reference

    @op.eval
    def _moves(p, *xs, **attrs):
        return ref(*xs, **attrs)


for _op in (reshape, transpose, split, slice_, squeeze, unsqueeze):
    _int_data_movement(_op)


def _concat_part(x, rescale: bool, scale: float, bias: float, out_zp: int, lo: int, hi: int, dtype: str):
    """One concat input on the output's parameters: a copy, or TFLite's ConcatenationWithScaling in float32.

    round(q * s_in/s_out - zp_in * s_in/s_out) + zp_out. The product is taken
    exactly in float64 and rounded once to float32 (what float32's multiply
    gives), so no compiler can contract it with the add into an FMA.
    """
    if not rescale:
        return x.astype(dtype)
    xp = fp.namespace(x)
    prod = (x.astype(xp.float64) * scale).astype(xp.float32)
    v = fp.round_half_away(prod + xp.float32(bias)).astype(xp.int64) + out_zp
    return clamp_cast(v, lo, hi, dtype)


@concat.prepare
def _concat_prepare(ctx, *, axis):
    """Per input: whether it is requantized (its parameters differ from the output's) and its float32 scale, bias.

    TFLite Micro requires equal parameters for int8/int16 (a plain copy);
    differing ones follow TFLite's ConcatenationWithScaling. Byte inputs also
    get ``tables``: each input's result for all 256 values, by bit pattern.
    """
    yt = ctx.out_types[0]
    s_y, zp_y = scalar_params(yt.quant, "concat output")
    out_dt = yt.dtype.numpy
    lo, hi = storage_range(out_dt)
    f32 = np.float32
    rescale, scales, biases = [], [], []
    for t in ctx.in_types:
        s, zp = scalar_params(t.quant, "concat input")
        scale = f32(s) * (f32(1.0) / f32(s_y))
        rescale.append(not (f32(s) == f32(s_y) and zp == zp_y))
        scales.append(float(scale))
        biases.append(float(f32(-zp) * scale))
    p = {
        "rescale": tuple(rescale), "scale": tuple(scales), "bias": tuple(biases),
        "out_zp": zp_y, "out_min": lo, "out_max": hi, "dtype": out_dt.name,
    }  # fmt: skip
    if out_dt.itemsize == 1 and all(t.dtype.numpy.itemsize == 1 for t in ctx.in_types):
        rows = []
        for t, r, s, b in zip(ctx.in_types, rescale, scales, biases):
            values = np.arange(256, dtype=np.uint8).view(t.dtype.numpy)
            rows.append(_concat_part(values, r, s, b, zp_y, lo, hi, out_dt.name))
        p["tables"] = np.stack(rows)
    return p


@concat.eval
def _concat_eval(p, *xs, axis):
    xp = fp.namespace(*xs)
    parts = [
        _concat_part(x, r, s, b, p.out_zp, p.out_min, p.out_max, p.dtype)
        for x, r, s, b in zip(xs, p.rescale, p.scale, p.bias)
    ]
    return xp.concatenate(parts, axis=axis)


@pad.prepare
def _pad_prepare(ctx, *, pads, value):
    """The fill on the quantized grid: a real value, so 0.0 pads with the zero point, as TFLite's PAD does."""
    q, dt = ctx.out_types[0].quant, ctx.out_types[0].dtype.numpy
    zps = {int(z) for z in q.zero_point}
    if q.scale.size != 1 and not (value == 0 and len(zps) == 1):
        raise ValueError(f"pad: the fill {value} would differ between the channels of per-channel quantization")
    lo, hi = storage_range(dt)
    return {"fill": min(max(quantize_bound(value, float(q.scale[0]), zps.pop()), lo), hi)}


@pad.eval
def _pad_eval(p, x, *, pads, value):
    if x.ndim == 0:
        return x.copy()
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
    return fp.namespace(x).pad(x, pairs, mode="constant", constant_values=p.fill)
