"""ONNX handlers for the ONNX equivalents of TFLite Micro's builtins (issue #16), registered in ``HANDLERS``.

Comparisons, logical ops and Where; Gather, GatherND, DepthToSpace, SpaceToDepth, Expand and Tile;
Resize and Upsample (the modes TFLite's align_corners / half_pixel_centers express); LpNormalization
and LpPool (p = 2); HardSigmoid, Reciprocal, Pow (exponents 0.5, 1 and 2), Mod (fmod = 0) and the
variadic Sum. Each maps onto IR ops that exist, exactly (a composition is only used where it computes
the same function); any attribute value it cannot express is refused with :class:`Unsupported`,
naming the attribute. This module is imported by :mod:`rlx_edge.frontends._onnx_ops` once its
table and helpers exist.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from rlx_edge.frontends._onnx_import import NHWC, Importer, Invalid, Unsupported, Value, drop_axes, internal_axis
from rlx_edge.frontends._onnx_ops import (
    HANDLERS,
    _axis,
    _binary,
    _runtime,
    _scalar_const,
    _static,
    _unary,
    _window,
    align,
)

# comparisons, logic and selection ---------------------------------------------------------------
for _onnx_op, _ir_op in (
    ("Equal", "equal"),
    ("Greater", "greater"),
    ("Less", "less"),
    ("GreaterOrEqual", "greater_equal"),
    ("LessOrEqual", "less_equal"),
    ("And", "logical_and"),
    ("Or", "logical_or"),
    # on bools (ONNX Xor's only type) exclusive or is inequality
    ("Xor", "not_equal"),
    # ONNX Sum is TFLite's ADD_N with broadcasting: a chain of adds
    ("Sum", "add"),
):
    HANDLERS.add(_onnx_op, _binary(_ir_op))
HANDLERS.add("Not", _unary("logical_not"))


@HANDLERS.rule("Where")
def _where(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    names, perm = align(imp, [_runtime(imp, node, i) for i in range(3)])
    out = imp.emit("select_v2", names, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


# elementwise compositions -----------------------------------------------------------------------
@HANDLERS.rule("Reciprocal")
def _reciprocal(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    one = _scalar_const(imp, 1.0, imp.dtype(x))
    out = imp.emit("div", [one, imp.rt(x, x.perm)], base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


# exponent -> IR op; None: the input itself
_POWERS: dict[float, str | None] = {1.0: None, 2.0: "square", 0.5: "sqrt"}


@HANDLERS.rule("Pow")
def _pow(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    e = imp.const_input(node, 1, "Pow exponent")
    if e is None or e.size != 1 or e.ndim > imp.rank(x):
        raise Unsupported("Pow needs a constant scalar exponent (one that does not broadcast the base)")
    k = float(e.reshape(-1)[0])
    if k not in _POWERS:
        raise Unsupported(f"Pow with exponent {k:g} is not supported (exponents {', '.join(map(str, _POWERS))})")
    op = _POWERS[k]
    if op is None:
        imp.vals[node.output[0]] = x
        return
    out = imp.emit(op, [imp.rt(x, x.perm)], base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("Mod")
def _mod(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    if int(a.get("fmod", 0)):
        raise Unsupported("Mod with fmod=1 (the C remainder) is not supported; fmod=0 (floored, as FLOOR_MOD) is")
    _binary("floor_mod")(imp, node, a)


@HANDLERS.rule("HardSigmoid")
def _hard_sigmoid(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """max(0, min(1, alpha * x + beta)), computed as ONNX defines it (a multiply, an add, a clamp)."""
    x = _runtime(imp, node)
    dt = imp.dtype(x)
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    y = imp.emit("mul", [imp.rt(x, x.perm), _scalar_const(imp, alpha, dt)])
    y = imp.emit("add", [y, _scalar_const(imp, beta, dt)])
    out = imp.emit("clamp", [y], {"min": 0.0, "max": 1.0}, base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


# indexing --------------------------------------------------------------------------------------------
@HANDLERS.rule("Gather")
def _gather(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x, idx = _runtime(imp, node, 0), _runtime(imp, node, 1)
    axis = _axis(int(a.get("axis", 0)), imp.rank(x))
    k = imp.rank(idx)
    # a permuted input keeps its layout when the gathered axis stays one axis (1-D indices) or goes (scalar)
    perm = None if x.is_const or k > 1 else x.perm
    out_perm = perm if k == 1 else drop_axes(perm, [axis])
    attrs = {"axis": internal_axis(perm, axis)}
    out = imp.emit("gather", [imp.rt(x, perm), imp.plain(idx)], attrs, base=imp.out_base(node, 0, out_perm))
    imp.set_out(node, 0, out, out_perm)


@HANDLERS.rule("GatherND")
def _gather_nd(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    if int(a.get("batch_dims", 0)):
        raise Unsupported(f"batch_dims={a['batch_dims']} is not supported (0 only, as TFLite's GATHER_ND)")
    x, idx = _runtime(imp, node, 0), _runtime(imp, node, 1)
    out = imp.emit("gather_nd", [imp.plain(x), imp.plain(idx)], base=imp.out_base(node))
    imp.set_out(node, 0, out)


# layout movement --------------------------------------------------------------------------------------
def _image(imp: Importer, node: onnx.NodeProto) -> Value:
    x = _runtime(imp, node)
    if imp.rank(x) != 4:
        raise Unsupported(f"only 4-D NCHW input is supported, input has rank {imp.rank(x)}")
    return x


def _blocksize(a: dict[str, Any]) -> int:
    b = int(a["blocksize"])  # required: the schema check has seen to it
    if b < 1:
        raise Invalid(f"blocksize {b} must be positive")
    return b


@HANDLERS.rule("DepthToSpace")
def _depth_to_space(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _image(imp, node)
    b = _blocksize(a)
    mode = a.get("mode", "DCR")
    xin = imp.rt(x, NHWC)
    if mode == "CRD":
        # CRD reads channel c*b*b + i*b + j where DCR (the IR's, TFLite's) reads (i*b + j)*C' + c:
        # the same op after a constant permutation of the channels
        c = _static(imp.onnx_shape(x)[1:2], "DepthToSpace CRD channels")[0]
        if c % (b * b):
            raise Invalid(f"{c} channels are not a multiple of blocksize**2 = {b * b}")
        order = np.arange(c, dtype=np.int32).reshape(c // (b * b), b * b).T.reshape(-1)
        xin = imp.emit("gather", [xin, imp.param(np.ascontiguousarray(order))], {"axis": 3})
    elif mode != "DCR":
        raise Unsupported(f"mode={mode!r} is not supported (DCR or CRD)")
    out = imp.emit("depth_to_space", [xin], {"block_size": b}, base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


@HANDLERS.rule("SpaceToDepth")
def _space_to_depth(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    # ONNX orders the new channels (row in block, column in block, channel): TFLite's order
    x = _image(imp, node)
    attrs = {"block_size": _blocksize(a)}
    out = imp.emit("space_to_depth", [imp.rt(x, NHWC)], attrs, base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


@HANDLERS.rule("Expand")
def _expand(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    shape = imp.const_input(node, 1, "Expand shape")
    if shape is None:
        raise Invalid("Expand needs a shape input")
    have = _static(imp.onnx_shape(x), "Expand input")
    try:  # ONNX broadcasts both ways: a 1 in the shape keeps the input's dimension
        out_shape = tuple(int(d) for d in np.broadcast_shapes(have, tuple(int(d) for d in shape.reshape(-1))))
    except ValueError:
        raise Invalid(f"input shape {list(have)} cannot be expanded to {shape.reshape(-1).tolist()}") from None
    if out_shape == have:
        imp.vals[node.output[0]] = x
        return
    perm = x.perm if len(out_shape) == len(have) else None
    internal = out_shape if perm is None else tuple(out_shape[p] for p in perm)
    out = imp.emit("broadcast_to", [imp.rt(x, perm)], {"shape": internal}, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


@HANDLERS.rule("Tile")
def _tile(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """Repeats along an axis are that many copies concatenated (the IR has no tile op)."""
    x = _runtime(imp, node)
    reps = imp.const_input(node, 1, "Tile repeats")
    r = imp.rank(x)
    if reps is None or reps.size != r:
        raise Invalid(f"repeats must have one entry per input dimension ({r})")
    counts = [int(v) for v in reps.reshape(-1)]
    if min(counts, default=1) < 1:
        raise Unsupported(f"repeats {counts} must be positive (an empty result is not supported)")
    y = imp.rt(x, x.perm)
    todo = [ax for ax, n in enumerate(counts) if n > 1]
    for k, ax in enumerate(todo):
        base = imp.out_base(node, 0, x.perm) if k == len(todo) - 1 else None
        y = imp.emit("concat", [y] * counts[ax], {"axis": internal_axis(x.perm, ax)}, base=base)
    imp.set_out(node, 0, y, x.perm)


# resizing -------------------------------------------------------------------------------------------
# (mode, coordinate_transformation_mode, nearest_mode or None) -> (align_corners, half_pixel_centers):
# the ONNX coordinate rules that compute TFLite's source pixels
_RESIZE_FLAGS: dict[tuple[str, str, str | None], tuple[bool, bool]] = {
    ("nearest", "asymmetric", "floor"): (False, False),
    # floor((x + 0.5) / s), clamped at 0: TFLite's half-pixel nearest neighbour
    ("nearest", "tf_half_pixel_for_nn", "floor"): (False, True),
    # round half up of (x + 0.5) / s - 0.5 is floor((x + 0.5) / s)
    ("nearest", "half_pixel", "round_prefer_ceil"): (False, True),
    ("nearest", "pytorch_half_pixel", "round_prefer_ceil"): (False, True),
    # TFLite rounds x * s half away from zero: half up, the positions being non-negative
    ("nearest", "align_corners", "round_prefer_ceil"): (True, False),
    ("linear", "asymmetric", None): (False, False),
    ("linear", "align_corners", None): (True, False),
    ("linear", "half_pixel", None): (False, True),
    ("linear", "pytorch_half_pixel", None): (False, True),
}


def _resize_sizes(imp: Importer, node: onnx.NodeProto, a: dict[str, Any], x: Value) -> tuple[int, int]:
    """Output (height, width) from the sizes or scales input; only the spatial axes may change."""
    shape = _static(imp.onnx_shape(x), "Resize input")
    r = len(shape)
    if node.op_type == "Upsample" and imp.opset < 9:
        scales, sizes = np.asarray(a["scales"], np.float64), None
    elif node.op_type == "Upsample" or imp.opset < 11:
        scales, sizes = imp.const_input(node, 1, "scales"), None
    else:
        scales, sizes = imp.const_input(node, 2, "scales"), imp.const_input(node, 3, "sizes")
    if sizes is not None and sizes.size == 0:
        sizes = None
    if scales is not None and scales.size == 0:
        scales = None
    if (scales is None) == (sizes is None):
        raise Invalid("exactly one of scales and sizes must be given")
    given = [float(v) for v in (scales if sizes is None else sizes).reshape(-1)]
    axes = [_axis(int(v), r) for v in a.get("axes", range(r))]
    if len(given) != len(axes):
        raise Invalid(f"{len(given)} {'scales' if sizes is None else 'sizes'} for {len(axes)} axes")
    out = list(shape)
    for ax, v in zip(axes, given):
        if sizes is not None:
            out[ax] = int(v)
        else:
            # ONNX maps coordinates with the scale given, TFLite with in/out: the same where in * scale is whole
            if not v > 0 or shape[ax] * v != math.floor(shape[ax] * v):
                raise Unsupported(
                    f"scale {v:g} of axis {ax} (size {shape[ax]}) gives no whole output size, which is not"
                    " supported (give sizes instead)"
                )
            out[ax] = int(shape[ax] * v)
    if out[0] != shape[0] or out[1] != shape[1]:
        raise Unsupported(
            f"resizing {list(shape)} to {out} changes the batch or channels, which is not supported"
            " (height and width only)"
        )
    return out[2], out[3]


@HANDLERS.rule("Resize", "Upsample")
def _resize(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _image(imp, node)
    mode = a.get("mode", "nearest")
    if node.op_type == "Upsample" or imp.opset < 11:
        ctm, nearest = "asymmetric", "floor"  # what Upsample and Resize-10 compute
    else:
        ctm = a.get("coordinate_transformation_mode", "half_pixel")
        nearest = a.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"mode={mode!r} is not supported (nearest or linear)")
    if int(a.get("antialias", 0)):
        raise Unsupported("antialias=1 is not supported")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported(f"keep_aspect_ratio_policy={a['keep_aspect_ratio_policy']!r} is not supported (stretch)")
    key = (mode, ctm, nearest if mode == "nearest" else None)
    if key not in _RESIZE_FLAGS:
        what = f"coordinate_transformation_mode={ctm!r}" + (f" with nearest_mode={nearest!r}" if key[2] else "")
        raise Unsupported(f"{mode} resizing with {what} is not supported (the modes TFLite's resize ops express)")
    align_corners, half_pixel = _RESIZE_FLAGS[key]
    h, w = _resize_sizes(imp, node, a, x)
    in_h, in_w = imp.onnx_shape(x)[2:]
    if ctm == "pytorch_half_pixel" and ((h == 1 and in_h != 1) or (w == 1 and in_w != 1)):
        # pytorch_half_pixel samples pixel 0 for an output of size 1, half_pixel the centre
        raise Unsupported("coordinate_transformation_mode='pytorch_half_pixel' to an output size of 1 is not supported")
    op = "resize_nearest_neighbor" if mode == "nearest" else "resize_bilinear"
    attrs = {"size": (h, w), "align_corners": align_corners, "half_pixel_centers": half_pixel}
    out = imp.emit(op, [imp.rt(x, NHWC)], attrs, base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


# norms ----------------------------------------------------------------------------------------------
def _p_is_2(a: dict[str, Any]) -> None:
    if int(a.get("p", 2)) != 2:
        raise Unsupported(f"p={a['p']} is not supported (p=2, as TFLite's L2 ops)")


@HANDLERS.rule("LpNormalization")
def _lp_normalization(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    _p_is_2(a)
    x = _runtime(imp, node)
    axis = internal_axis(x.perm, _axis(int(a.get("axis", -1)), imp.rank(x)))
    out = imp.emit("l2_normalize", [imp.rt(x, x.perm)], {"axis": axis}, base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("LpPool")
def _lp_pool(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """sqrt(sum of squares) per window: the IR's l2_pool2d (sqrt of the mean) times sqrt(window size).

    ONNX's padding adds zeros to the sum, so the padding is made explicit first and every window
    of the unpadded pool then has the full count.
    """
    _p_is_2(a)
    x = _image(imp, node)
    if any(d != 1 for d in a.get("dilations", (1, 1))):
        raise Unsupported(f"dilations {list(a['dilations'])} are not supported")
    kernel = tuple(int(k) for k in a["kernel_shape"])
    strides, _, pads = _window(imp, a, imp.onnx_shape(x), kernel, ceil_mode=bool(a.get("ceil_mode", 0)))
    y = imp.rt(x, NHWC)
    if any(pads):
        top, bottom, left, right = pads
        y = imp.emit("pad", [y], {"pads": (0, 0, top, bottom, left, right, 0, 0), "value": 0.0})
    y = imp.emit("l2_pool2d", [y], {"kernel": kernel, "strides": strides, "padding": "valid"})
    root = _scalar_const(imp, math.sqrt(kernel[0] * kernel[1]), imp.dtype(x))
    out = imp.emit("mul", [y, root], base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)
