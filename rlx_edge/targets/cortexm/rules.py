"""The Cortex-M rule table: one rule per op, each returning a :class:`Layer`.

A rule reads one node of a quantized graph and decides, at compile time,
everything its kernel call needs: which kernel (fast path or general), the
parameter struct's fields, the constant arrays (weights re-laid out for the
kernel's access order, biases with the input zero point folded in, Q31
multipliers and shifts, lookup tables) and the scratch bytes the kernel uses.
Every multiplier, shift, clamp and table comes from the node's prepared
parameters (``Program.quant``, the op's own ``prepare``), the ones the
reference computes with, so the C computes exactly what the reference computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import QContext, window_shape
from rlx_edge.ir.ops.conv import folded_bias
from rlx_edge.ir.passes.legalize import check_quantized_node
from rlx_edge.ir.plan import prepare_node
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.cortexm._gather import WALK_INTS, kernel_tables, source_maps, walk

RULES = RuleTable.for_ops("cortexm")
# Quantized storage types the kernels take (rlx_edge.targets.support reports them);
# int4 weights are packed two per byte in flash (the int4 rules, at the end of this file).
ACTIVATION_DTYPES = frozenset({DType.i8, DType.i16})  # int16: the 16x8 rules at the end of this file
WEIGHT_DTYPES = frozenset({DType.i8, DType.i4})

__all__ = ["INT16_OPS", "OPTIMIZE_LEVELS", "RULES", "Const", "Layer", "layer_for", "scratch_bytes"]

# What a layer's constant layouts trade: "size" int8 weights and the generic kernels only
# (the least code), "balanced" int8 weights everywhere (every array once, shared by both
# builds), "speed" also the layouts widened to int16 where a kernel runs faster on them
# (the 3x3 depthwise DSP path), at about twice the flash of those layers.
OPTIMIZE_LEVELS = ("size", "balanced", "speed")
# The level of the layer_for call in progress: the rules read it, and the rule signature
# (graph, node, params) stays the one every op's rule has.
_OPTIMIZE: ContextVar[str] = ContextVar("cortexm_optimize", default="balanced")


@dataclass(frozen=True)
class Const:
    """A reference to one of the layer's constant arrays inside a struct initializer."""

    key: str


@dataclass(frozen=True)
class Symbol:
    """A C function named inside a struct initializer: the kernel instance a layer's parameters
    select, so that the firmware links only the instances its layers name."""

    name: str


@dataclass
class Layer:
    """What one scheduled node becomes in model.c.

    ``kernel`` is the C function (None: no code, a view). ``fields`` is the
    parameter struct's initializer (ints, floats, :class:`Const`, lists,
    nested dicts); ``consts`` the arrays it points to; ``args`` the call's
    pointer arguments after the struct: ``("in", k)``, ``("out", k)``,
    ``("scratch", ctype)``, ``("ins",)`` (an array of every input),
    ``("outs",)`` (an array of every output) or ``("bytes", n)``.
    """

    kernel: str | None
    struct: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    args: list[tuple] = field(default_factory=list)
    scratch: int = 0
    guards: dict[str, str] = field(default_factory=dict)
    """Constants only one build of the C reads: key -> "dsp" (SXTB16/SMLAD path) or "portable"."""


def layer_for(graph: Graph, node: Node, params: Prepared | None = None, optimize: str = "balanced") -> Layer:
    """What ``node`` becomes in model.c; ``params`` are its prepared integer parameters (``Program.quant``).

    Without ``params`` (the planner asking for scratch bytes before the
    Program exists) the op's own ``prepare`` supplies them. ``optimize`` is
    one of :data:`OPTIMIZE_LEVELS`; no level changes a layer's scratch bytes,
    so one plan serves all three.
    """
    if optimize not in OPTIMIZE_LEVELS:
        raise UnsupportedOpError(f"unknown optimize level {optimize!r}; use one of {', '.join(OPTIMIZE_LEVELS)}")
    if node.op not in RULES:
        raise UnsupportedOpError(
            f"node {node.name!r}: op {node.op} has no cortexm kernel (cortexm supports: {', '.join(RULES)})"
        )
    check_quantized_node(graph, node)  # rules read scales and zero points without asking
    try:
        if params is None:
            params = prepare_node(graph, node) or Prepared()
        token = _OPTIMIZE.set(optimize)
        try:
            return _rule_for(graph, node)(graph, node, params)
        finally:
            _OPTIMIZE.reset(token)
    except ValueError as e:  # the ops' checks of the types (per-tensor scales, representable multipliers)
        raise UnsupportedOpError(f"node {node.name!r} ({node.op}): the cortexm target cannot compile it: {e}") from e


def scratch_bytes(graph: Graph, node: Node, params: Prepared | None = None) -> int:
    """The planner's scratch callback: bytes of kernel scratch ``node`` needs (``params``: its prepared parameters)."""
    return layer_for(graph, node, params).scratch


# helpers ---------------------------------------------------------------------------------
def _t(graph: Graph, v: str) -> TensorType:
    return graph.types[v]


def _shape(t: TensorType) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _need(cond: bool, node: Node, why: str) -> None:
    if not cond:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op}): the cortexm target {why}")


def _int8(graph: Graph, node: Node, *values: str) -> None:
    for v in values:
        t = _t(graph, v)
        ok = t.dtype == DType.i8 and t.quant is not None
        _need(ok, node, f"needs quantized int8 tensors ({v} is {t.dtype})")
        _need(not t.quant.per_channel, node, f"needs per-tensor quantization of activation {v}")


def _ctx(graph: Graph, node: Node) -> QContext:
    ins = tuple(None if v is None else graph.types[v] for v in node.inputs)
    return QContext(node.name, ins, tuple(graph.types[o] for o in node.outputs))


def _pad4(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=a.dtype)
    out[: a.size] = a
    return out


def constant_channels(
    mult: np.ndarray, shift: np.ndarray, acc_lo: np.ndarray, acc_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Channels whose requantized value (before the zero point) is the same
    for every accumulator in [acc_lo, acc_hi]: (mask, that value).

    MultiplyByQuantizedMultiplier is non-decreasing in the accumulator for a
    right shift (e >= 1) and a multiplier >= 0, so equal values at both ends
    prove it; a zero multiplier gives 0 for any accumulator. Such channels
    (near-zero weights, or a huge bias, with e up to 31) would otherwise keep
    a whole layer off the fast requantization: zp * 2**e overflows there.
    """
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    const = np.zeros(mult.size, bool)
    value = np.zeros(mult.size, np.int64)
    for c in range(mult.size):
        lo, hi = int(acc_lo[c]), int(acc_hi[c])
        if mult[c] == 0:
            const[c] = True
            continue
        if shift[c] > -1 or mult[c] < 0 or lo < -(2**31) or hi >= 2**31:
            continue
        v = fp.multiply_by_quantized_multiplier(np.array([lo, hi], np.int64), int(mult[c]), int(shift[c]))
        if int(v[0]) == int(v[1]) and abs(int(v[0])) < 2**20:
            const[c], value[c] = True, int(v[0])
    return const, value


def _requant(mult, shift, bound, acc_lo, acc_hi, zp: int, lo: int, hi: int):
    """(mode, mult, add, right shift) of a layer: fast_requant, and where it
    fails, fast_requant again with the constant channels (constant_channels)
    rewritten as multiplier 0, e = 1 and their value folded into rq_add: the
    fast formula then gives (2 (zp + v) + 1 - [acc < 0]) >> 1 = zp + v."""
    mode, add, rshift = fast_requant(mult, shift, bound, zp, lo, hi)
    if mode != 0:
        return mode, mult, add, rshift
    const, value = constant_channels(mult, shift, acc_lo, acc_hi)
    if not const.any():
        return mode, mult, add, rshift
    m2 = np.where(const, 0, mult).astype(np.int32)
    s2 = np.where(const, -1, shift).astype(np.int32)
    mode2, add2, rshift2 = fast_requant(m2, s2, np.where(const, 0, bound), zp, lo, hi)
    if mode2 == 0:
        return mode, mult, add, rshift
    add2 = add2.astype(np.int64) + 2 * np.where(const, value, 0)
    if np.any(np.abs(add2) >= 2**31 - 2):
        return mode, mult, add, rshift
    return mode2, m2, add2.astype(np.int32), rshift2


def fast_requant(
    mult: np.ndarray, shift: np.ndarray, bound: np.ndarray, zp: int, lo: int, hi: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """The requantization the kernels run: (mode, add, right shift) per channel.

    Mode 0 is the reference formula (``rlx_requantize``, double rounding).
    Modes 1 and 2 compute the same value in four instructions::

        t = SMMLAR(acc << 1, mult, add)   # high word of (add << 32) + 2 acc mult + 2**31
        t = (t + (acc >> 31)) >> e        # arithmetic shifts; mode 2 then saturates to int8

    with ``add = 2**(e-1) + zp * 2**e`` and ``e = -shift``. It is exact when
    every channel shifts right (e >= 1) and ``|acc| <= bound < 2**30``: then
    the high word is SaturatingRoundingDoublingHighMul (no saturation case:
    the multiplier is below 2**31), adding ``2**(e-1)`` and one less for a
    negative accumulator before the floor shift is RoundingDivideByPOT (the
    sign of the product is the accumulator's, and a product rounded to 0
    gives the same result either way), and ``zp * 2**e`` added before the
    shift is ``zp`` added after it. No intermediate leaves int32 (checked
    here). Mode 2 is mode 1 when the activation range is all of int8.
    """
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    bound = np.asarray(bound, dtype=np.int64)
    e = -shift
    fallback = (0, np.zeros(mult.size, np.int32), shift.astype(np.int32))
    if mult.size == 0 or np.any(e < 1) or np.any(e > 31) or np.any(bound >= 2**30) or np.any(mult < 0):
        return fallback
    add = (np.int64(1) << (e - 1)) + np.int64(zp) * (np.int64(1) << e)
    v_max = (bound * mult >> 31) + 2
    if np.any(np.abs(add) + v_max + 1 >= 2**31):
        return fallback
    mode = 2 if (lo, hi) == (-128, 127) else 1
    return mode, add.astype(np.int32), e.astype(np.int32)


def gemm_weight_layout(w2: np.ndarray) -> np.ndarray:
    """Weights [O, K] (int8, O and K padded with zeros to multiples of 4) in the byte order both
    builds of the GEMM read: per block of 4 rows and quad of 4 reduction elements, 16 bytes,

        word 0: r0k0 r1k0 r0k2 r1k2   word 1: r2k0 r3k0 r2k2 r3k2
        word 2: r0k1 r1k1 r0k3 r1k3   word 3: r2k1 r3k1 r2k3 r3k3

    with the even rows' bytes stored + 128 (unsigned). A halfword of a word is then
    ``w_even + 128 + 256 w_odd`` exactly, so one SMLAD of the input pair (k0, k2) or (k1, k3)
    against the raw word sums ``x w_even + 128 x + 256 x w_odd``, and SXTB16 ROR 8 of the same
    word gives the odd row's pair for a second SMLAD: 4 weights widened in registers with one
    SXTB16, the kernel subtracting ``256 acc_odd`` and ``128 sum(x)`` once per block.
    """
    o, k = w2.shape
    ob, kq = -(-o // 4), -(-k // 4)
    wp = np.zeros((ob * 4, kq * 4), dtype=np.int16)
    wp[:o, :k] = w2
    wp[0::2] += 128  # even rows: unsigned bytes
    blocks = wp.reshape(ob, 4, kq, 4).transpose(0, 2, 1, 3)  # [block][quad][row][k]
    out = np.zeros((ob, kq, 16), dtype=np.int16)
    for r in range(4):
        for j in range(4):
            out[:, :, 4 * (2 * (j & 1) + (r >> 1)) + 2 * (j >> 1) + (r & 1)] = blocks[:, :, r, j]
    return out.astype(np.uint8).view(np.int8).reshape(-1)


def _gemm(graph: Graph, node: Node, params: Prepared, w2: np.ndarray, b: np.ndarray | None) -> tuple[dict, dict, int]:
    """Fields and constants of an int8 GEMM: weights [O, K] re-laid out, folded bias, multipliers."""
    wt = _t(graph, node.inputs[1])
    zp_y = params.out_zp
    _need(wt.dtype in WEIGHT_DTYPES, node, f"needs int8 or int4 weights (got {wt.dtype})")
    _need(not np.any(wt.quant.zero_point), node, "needs symmetric weights (zero point 0)")
    o, k = w2.shape
    kq = -(-k // 4)
    ob = -(-o // 4)
    # the kernel accumulates the raw int8 input: the input offset goes into the bias
    folded = fp.wrap_int32(folded_bias(params, w2.astype(np.int64).sum(axis=1), b)).astype(np.int32)
    mult, shift, lo, hi = params.mult, params.shift, params.act_min, params.act_max
    # |acc| for any int8 input: the folded bias plus 128 * sum |w|
    bound = np.abs(folded.astype(np.int64)) + 128 * np.abs(w2.astype(np.int64)).sum(axis=1)
    w64 = w2.astype(np.int64)
    acc_lo = folded.astype(np.int64) + np.minimum(-128 * w64, 127 * w64).sum(axis=1)
    acc_hi = folded.astype(np.int64) + np.maximum(-128 * w64, 127 * w64).sum(axis=1)
    mode, mult, add, rshift = _requant(mult, shift, bound, acc_lo, acc_hi, zp_y, lo, hi)
    fields = {
        "out_c": o,
        "k_quads": kq,
        "out_zp": zp_y,
        "act_min": lo,
        "act_max": hi,
        "rq_mode": mode,
        "weights": Const("weights"),
        "chan": Const("chan"),
    }
    # one array per block of 4 rows, as the kernel walks it (rlx_nn.h): the 4 biases, then per
    # row its multiplier and its shift (mode 0) or rq_add (an odd multiple of 2**(e-1) that
    # holds the shift too, see fast_requant); the bytes of three per-channel arrays. A partial
    # last block's missing rows get multiplier 0 and, in the fast form, rq_add 1 (e = 1): the
    # kernel computes them too (and drops them) with no undefined shift
    second = _pad4(rshift.astype(np.int32), ob * 4) if mode == 0 else np.ones(ob * 4, np.int32)
    if mode != 0:
        second[:o] = add
    pairs = np.stack([_pad4(mult.astype(np.int32), ob * 4), second], axis=1)
    # the even rows' bias as their accumulators start on the DSP build, + 256 x the odd row's
    # (SMLAD of a raw weight word also sums 256 x the odd row's products: rlx_even_start)
    biases = _pad4(folded, ob * 4).reshape(ob, 4).astype(np.int64)
    biases[:, 0::2] += biases[:, 1::2] << 8
    chan = np.concatenate([fp.wrap_int32(biases).astype(np.int32), pairs.reshape(ob, 8)], axis=1)
    consts = {
        "weights": gemm_weight_layout(w2),
        "chan": np.ascontiguousarray(chan, dtype=np.int32).reshape(-1),
    }
    return fields, consts, 2 * kq * 4 * 2  # two pixels of int16


def _weighted(graph: Graph, node: Node) -> tuple[str, np.ndarray, np.ndarray | None]:
    """A layer's input name, its constant weights and its constant bias (None without one); int8 data."""
    x, w, b = (node.inputs + [None])[:3]
    _int8(graph, node, x, node.outputs[0])
    wv = graph.params.get(w)
    _need(wv is not None and (b is None or b in graph.params), node, "needs constant weights and bias")
    return x, wv, None if b is None else graph.params[b]


def _image_fields(graph: Graph, node: Node) -> dict:
    """The batch and the input and output images of a window layer (NHWC), as its params name them."""
    n, h, w, c = _shape(_t(graph, node.inputs[0]))
    _, oh, ow, _ = _shape(_t(graph, node.outputs[0]))
    return {"batches": n, "in_h": h, "in_w": w, "in_c": c, "out_h": oh, "out_w": ow}


def _window_fields(node: Node, kh: int, kw: int, pads: tuple) -> dict:
    """The kernel, strides, dilations and the top and left padding, as the window kernels' params name them."""
    sh, sw = node.attrs["strides"]
    dh, dw = node.attrs["dilations"]
    return {"k_h": kh, "k_w": kw, "stride_h": sh, "stride_w": sw, "dil_h": dh, "dil_w": dw,
            "pad_top": pads[0], "pad_left": pads[2]}  # fmt: skip


def _window(node: Node, x: TensorType, kh: int, kw: int) -> tuple[int, int, int, int]:
    a = node.attrs
    _, _, p = window_shape(x, kh, kw, a["strides"], a.get("dilations", (1, 1)), a["padding"], a["pads"])
    return p


# convolutions ----------------------------------------------------------------------------
@RULES.rule("conv2d")
def _conv2d(graph: Graph, node: Node, params: Prepared) -> Layer:
    _, wv, bv = _weighted(graph, node)
    if node.attrs["groups"] > 1:
        wt = _t(graph, node.inputs[1])
        _need(wt.dtype == DType.i8, node, f"needs int8 weights (got {wt.dtype})")
        _need(not np.any(wt.quant.zero_point), node, "needs symmetric weights (zero point 0)")
        bias = np.zeros(wv.shape[0], np.int64) if bv is None else np.asarray(bv, np.int64).reshape(-1)
        rq = {"in_offset": -params.in_zp, "out_zp": params.out_zp, "act_min": params.act_min,
              "act_max": params.act_max, "wide": 0}  # fmt: skip
        return _conv_grouped(graph, node, params, wv, bias, rq, params.mult, params.shift)
    return _conv_layer(graph, node, params, wv, bv)


def _conv_grouped(
    graph: Graph, node: Node, params: Prepared, wv: np.ndarray, bias: np.ndarray, rq: dict, mult, shift
) -> Layer:
    """A grouped conv2d (int8 or int16 activations) on kernels/rlx_convolve_grouped.c: weights [O, KH, KW,
    C/groups] as TFLite lays them out, int64 bias, the requantization fields ``rq`` and per-channel
    ``mult`` / ``shift`` of the node's prepared parameters."""
    o, kh, kw, _ = wv.shape
    elem = _t(graph, node.inputs[0]).dtype.storage_bytes
    fields = {**_image_fields(graph, node), "out_c": o, "groups": node.attrs["groups"], "elem_bytes": elem,
              **_window_fields(node, kh, kw, params.pads), **rq, "weights": Const("weights"), "bias": Const("bias"),
              "mult": Const("mult"), "shift": Const("shift")}  # fmt: skip
    arrays = (("bias", bias, np.int64), ("mult", mult, np.int32), ("shift", shift, np.int32))
    per_channel = {k: np.broadcast_to(np.asarray(v).reshape(-1), (o,)).astype(dt) for k, v, dt in arrays}
    consts = {"weights": np.ascontiguousarray(wv, np.int8).reshape(-1), **per_channel}
    return Layer("rlx_convolve_grouped", "rlx_conv_grouped_params", fields, consts, [("in", 0), ("out", 0)])


def _dense_groups(wv: np.ndarray, groups: int) -> np.ndarray:
    """Grouped int4 conv weights [O, KH, KW, C/groups] as dense ones [O, KH, KW, C], zero outside each
    output channel's group: the accumulators, the folded bias (the weight sums) and so every output stay
    exactly the grouped conv's, and the int4 conv kernels run it at ``groups`` times its MACs and flash."""
    if groups == 1:
        return wv
    o, kh, kw, ig = wv.shape
    og = o // groups
    dense = np.zeros((o, kh, kw, ig * groups), wv.dtype)
    for g in range(groups):
        dense[g * og : (g + 1) * og, :, :, g * ig : (g + 1) * ig] = wv[g * og : (g + 1) * og]
    return dense


def _gemm2_instance(mode: int, out_c: int, hi: int) -> str:
    """The 4 x 2 GEMM instance (rlx_convolve_s8.c) of a convolution with requantization ``mode``,
    ``out_c`` output channels and upper bound ``hi``: whole blocks of 4 rows run without row tests,
    the int8 range (mode 2) saturates instead of clamping, and an upper bound of 127 (ReLU) clamps
    at the lower bound alone (M4 sweep, 3x3 16x16x3->16 s2: 4 instructions a block fewer); a
    partial last block runs mode 2 as mode 1."""
    if mode == 0:
        return "rlx_gemm_2px_ref"
    if out_c % 4:
        return "rlx_gemm_2px_part_lo" if mode == 1 and hi == 127 else "rlx_gemm_2px_part"
    if mode == 2:
        return "rlx_gemm_2px_sat"
    return "rlx_gemm_2px_lo" if hi == 127 else "rlx_gemm_2px_clamp"


def _conv_layer(graph: Graph, node: Node, params: Prepared, wv: np.ndarray, bv: np.ndarray | None) -> Layer:
    """The convolution kernel's layer for weights ``wv`` [O, KH, KW, C] (the node's, or a depthwise's as dense)."""
    o, kh, kw, c = wv.shape
    pads = params.pads
    one_by_one = kh == 1 and kw == 1 and not any(pads)
    geometry = {**_image_fields(graph, node), **_window_fields(node, kh, kw, pads)}
    # size: the im2col kernel for every shape, so the 1x1 one is not linked
    kernel = "rlx_convolve_1x1_s8" if one_by_one and _OPTIMIZE.get() != "size" else "rlx_convolve_s8"
    if kernel == "rlx_convolve_s8" and node.op == "conv2d" and _OPTIMIZE.get() != "size":
        # a field (kh kw c bytes) of at most 256 bytes on channels not a multiple of 4 (rlx_convolve_s8's
        # own test, e.g. 3x3 on 3 channels): its entry alone, which leaves the other paths unlinked (VWW's flash)
        if wv[0].size <= 256 and c % 4:
            kernel = "rlx_convolve_small_s8"
    pad_bytes = 0
    if kernel in ("rlx_convolve_s8", "rlx_convolve_small_s8") and any(pads) and geometry["dil_w"] == 1:
        # a padded layer whose padded image is small (not at size): padded once into the scratch, every
        # pixel pair then takes the paths of a field inside the image (their fast paths need no dilation
        # along w: 3x3 d2 14x14x6 s2, M4 2.28 -> 2.44 instructions/MAC)
        if _pad_image_bytes(geometry) <= _PAD_IMAGE_MAX and _OPTIMIZE.get() != "size":
            kernel = kernel.replace("_s8", "_pad_s8")
            pad_bytes = _pad_image_bytes(geometry)
    w2 = wv.reshape(o, -1)
    if kernel == "rlx_convolve_small_pad_s8" and not (kh == 3 and kw * c == 9):
        w2 = w2[:, _split_order(kh, kw * c)]  # rlx_pair_split's order of the reduction
    gemm, consts, scratch = _gemm(graph, node, params, w2, bv)
    gemm["gemm2"] = Symbol(_gemm2_instance(gemm["rq_mode"], o, gemm["act_max"]))
    fields = {"gemm": gemm, **geometry, "in_zp": params.in_zp}
    scratch += pad_bytes
    k4 = conv_1x1_k4_stream(wv.reshape(o, -1), consts["chan"], gemm) if one_by_one else None
    kw = conv_1x1_kw_stream(wv.reshape(o, -1), consts["chan"], gemm) if one_by_one else None
    if k4 is not None or kw is not None:
        # the widened channels; every optimize level plans the same bytes
        k = wv.shape[-1]
        scratch = max(scratch, 24 * o if k4 is not None else _kw_scratch(o, k))
        if _OPTIMIZE.get() != "size":
            kernel, stream = k4 if k4 is not None else kw
            gemm.update(weights=None, chan=Const("chan"), gemm2=None)
            consts = {"chan": stream}
    return Layer(kernel, "rlx_conv_params", fields, consts, [("in", 0), ("out", 0), ("scratch", "int16_t")], scratch)


_PAD_IMAGE_MAX = 2048  # bytes of padded image (scratch) rlx_convolve_pad_s8 and _small_pad_s8 take


def _split_order(rows: int, seg: int) -> np.ndarray:
    """The reduction order of rlx_convolve_small_pad_s8's fields other than 3 rows of 9 bytes
    (rlx_pair_split), as indices into the (kh, kw, c) order of ``rows`` kernel rows of ``seg`` bytes:
    each row's whole quads (seg & ~3 bytes), read in place from the padded image, then the rows' last
    seg & 3 bytes, gathered; as many quads as the plain order's."""
    whole = seg & ~3
    idx = np.arange(rows * seg).reshape(rows, seg)
    return np.concatenate([idx[:, :whole].reshape(-1), idx[:, whole:].reshape(-1)])


def _pad_image_bytes(f: dict) -> int:
    """rlx_pad_image's bytes (kernels/rlx_convolve_s8.c), whole words: the input rows and columns the
    output windows reach, (out - 1) stride + (k - 1) dilation + 1 of each, of in_c bytes a pixel."""
    hp = (f["out_h"] - 1) * f["stride_h"] + (f["k_h"] - 1) * f["dil_h"] + 1
    wp = (f["out_w"] - 1) * f["stride_w"] + (f["k_w"] - 1) * f["dil_w"] + 1
    return -(-hp * wp * f["in_c"] // 4) * 4


_KW_ROWS = 8  # rlx_convolve_1x1_kw_s8.c's RLX_KW_ROWS: channels a group


def _kw_scratch(o: int, k: int) -> int:
    """rlx_convolve_1x1_kw_*'s scratch bytes: a group's records (the bias, K / 2 weight pairs,
    the multiplier, rq_add and the shift, a word each) and its jump words (one a chunk of 2, and the entry)."""
    rows = min(o, _KW_ROWS)
    return 4 * (rows * (k // 2 + 4) + -(-rows // 2) + 1)


def _chan_parts(chan: np.ndarray, gemm: dict, o: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """From _gemm's per-block constants ``chan``: every channel's folded bias, multiplier, rq_add and its
    trailing zeros (the right shift e - 1), and whether the lower bound is the zero point and the
    constant channels (multiplier 0, _requant) come out exact where the kernel clamps the doubled
    accumulator at 0 and saturates at 127 less the upper bound's offset (hi - 127) before adding it
    back (rlx_convolve_1x1_k4_relu_s8's and _clamp_s8's, rlx_convolve_1x1_kw_relu_s8's and _clamp_s8's)."""
    zp, lo, hi = gemm["out_zp"], gemm["act_min"], gemm["act_max"]
    ch = chan.astype(np.int64).reshape(-1, 12)
    biases = ch[:, :4].copy()
    biases[:, 0::2] -= biases[:, 1::2] << 8  # the even rows' words hold 256 x the odd row's bias
    bias = fp.wrap_int32(biases.reshape(-1)[:o])
    mult, add = ch[:, 4::2].reshape(-1)[:o], ch[:, 5::2].reshape(-1)[:o]
    shift = np.array([(int(a) & -int(a)).bit_length() - 1 for a in add], np.int64)
    const = (add[mult == 0] >> (shift[mult == 0] + 1)).astype(np.int64)
    up = hi - 127  # the clamp instance's offset (0 for the others)
    # the constant channels as the kernel computes them: saturated less up, then up added
    exact = lo == zp and np.array_equal(np.clip(const - up, -128, 127) + up, np.clip(const, lo, hi))
    return bias, mult, add, shift, bool(exact)


def _fast_1x1_instance(
    chan: np.ndarray, gemm: dict, o: int
) -> tuple[str | None, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The instance of the k4 and kw 1x1 kernels a layer takes ("relu", "clamp", "" for the int8 range,
    None for none of them) and _chan_parts' bias, multiplier, rq_add (less the clamp's offset) and
    trailing zeros."""
    bias, mult, add, shift, exact = _chan_parts(chan, gemm, o)
    hi = gemm["act_max"]
    add = add - ((hi - 127) << (shift + 1))  # the clamp instance's offset (0 for the others)
    if exact and hi == 127:
        inst = "relu"
    elif exact and np.all(np.abs(add) < 2**30 - 1):  # no overflow of SMMLAR's sum
        inst = "clamp"
    else:
        inst = "" if gemm["rq_mode"] == 2 else None
    return inst, bias, mult, add, shift


def conv_1x1_kw_stream(w2: np.ndarray, chan: np.ndarray, gemm: dict) -> tuple[str, np.ndarray] | None:
    """rlx_convolve_1x1_kw_*'s kernel and its one array (kernels/rlx_convolve_1x1_kw_s8.c) for a 1x1
    layer's weights [O, K] and _gemm's per-block constants ``chan``; None where it does not apply (K
    other than 8 and 16, the reference requantization, bounds other than the three instances').

    Per channel K / 4 + 3 words: its folded bias (doubled for _s8, whose inputs the kernel doubles:
    rlx_rq_fast's doubled accumulator), its K int8 weights in order, its multiplier and rq_add. The
    instances and their bounds are rlx_convolve_1x1_k4_*'s (conv_1x1_k4_stream): _relu (the lower
    bound the zero point, the upper one 127), _clamp (an upper bound u below 127: rq_add holds the
    zero point less u - 127) and _s8 (the int8 range)."""
    o, k = w2.shape
    mode = gemm["rq_mode"]
    if k not in (8, 16) or mode == 0:
        return None
    inst, bias, mult, add, _ = _fast_1x1_instance(chan, gemm, o)
    if inst is None:
        return None
    kernel = f"rlx_convolve_1x1_kw_{inst}_s8" if inst else "rlx_convolve_1x1_kw_s8"
    if not inst:
        bias = 2 * bias  # |bias| < 2**30: fast_requant's bound
    words = np.ascontiguousarray(w2, np.int8).view("<i4").reshape(o, k // 4).astype(np.int64)
    stream = np.concatenate([bias[:, None], words, mult[:, None], add[:, None]], axis=1).reshape(-1)
    return kernel, np.ascontiguousarray(stream, np.int32)


_K4_E = 12  # rlx_convolve_1x1_k4_relu12_s8's one right shift (an immediate of its saturation)


def _k4_relu12(
    w2: np.ndarray, bias: np.ndarray, mult: np.ndarray, add: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """rlx_convolve_1x1_k4_relu12_s8's rq_add and scale 2**m per channel, or None where it does not apply.

    _relu_s8 computes ``floor((2 acc mult + add 2**32 + 2**31) / 2**(32 + e))`` (SMMLAR, then a shift by
    the channel's e); with the bias and weights scaled by ``2**m``, ``m = 12 - e >= 1``, SMMLA (no
    rounding) of the doubled accumulator with ``add 2**m + 2**(m - 1)`` has the same numerator times
    ``2**m`` over ``2**(32 + 12)``: the same floor, the shift one immediate. Needs m <= 8 (a scaled
    int8 weight stays int16), the scaled, doubled accumulator below 2**31 (USAT's shift) and SMMLA's
    sum inside int32; and at most 8 channels (its pass runs them all at once)."""
    m = _K4_E - e.astype(np.int64)
    if w2.shape[0] > 8 or np.any(m < 1) or np.any(m > 8):
        return None
    reach = np.abs(bias.astype(np.int64)) + 128 * np.abs(w2.astype(np.int64)).sum(axis=1)
    scaled = reach << (m + 1)  # |2 acc 2**m| and every partial sum's
    add2 = (add.astype(np.int64) << m) + (np.int64(1) << (m - 1))
    top = np.abs(add2) + (scaled * mult.astype(np.int64) >> 32) + 1
    if np.any(scaled >= 2**31) or np.any(top >= 2**31):
        return None
    return add2, np.int64(1) << m


def conv_1x1_k4_stream(w2: np.ndarray, chan: np.ndarray, gemm: dict) -> tuple[str, np.ndarray] | None:
    """rlx_convolve_1x1_k4_*'s kernel and its one array (kernels/rlx_convolve_1x1_k4_s8.c) for a 1x1
    layer's weights [O, K] and _gemm's per-block constants ``chan``; None where it does not apply
    (K above 4, the reference requantization, bounds other than the three instances').

    Per channel 5 words: its folded bias, its weights as one int8 word (weight k at byte 4 - K + k,
    lined up with the word that ends at a pixel's last input), its multiplier, rq_add and the
    trailing zeros of rq_add. The _relu and _clamp instances clamp the doubled accumulator at 0,
    exact where the lower bound is the zero point: the fast form is monotone in the accumulator and
    gives the zero point at 0, except on the constant channels (multiplier 0, _requant) whose value
    it gives whatever the accumulator, checked here. _clamp's upper bound u is below 127: its rq_add
    holds the zero point less u - 127 (the same trailing zeros), so that the saturation at 127 is
    the clamp at u, and the kernel adds u - 127 back. _relu12 (_k4_relu12) is _relu on at most 8
    channels whose shifts e are 4 to 11: its stream holds the bias times 2**m (m = 12 - e), rq_add
    2**m (add + 1/2) and 2**m in place of the trailing zeros (sweep 1x1 7x7x3->5, M4: 3.384 -> 2.902
    instructions/MAC)."""
    o, k = w2.shape
    mode = gemm["rq_mode"]
    if not 1 <= k <= 4 or mode == 0:
        return None
    inst, bias, mult, add, shift = _fast_1x1_instance(chan, gemm, o)
    if inst is None:
        return None
    kernel = f"rlx_convolve_1x1_k4_{inst}_s8" if inst else "rlx_convolve_1x1_k4_s8"
    scaled = _k4_relu12(w2, bias, mult, add, shift + 1) if inst == "relu" else None
    if scaled is not None:
        kernel = "rlx_convolve_1x1_k4_relu12_s8"
        add, shift = scaled
        bias = bias * shift  # the bias times 2**m: the stream's last word
    wpad = np.zeros((o, 4), np.int64)
    wpad[:, 4 - k :] = w2
    words = wpad.astype(np.uint8).view("<i4").reshape(-1).astype(np.int64)
    stream = np.stack([bias, words, mult, add, shift], axis=1).reshape(-1)
    return kernel, np.ascontiguousarray(stream, np.int32)


def _dw_along_h(f: dict) -> bool:
    """Whether the depthwise ring and line kernels walk a window along H: a Kx1 window (K > 1)."""
    return f["k_w"] == 1 and f["k_h"] > 1


def _dw_ring_scratch(f: dict) -> int:
    """rlx_depthwise_conv_ring_s8's scratch bytes (rlx_dw_walk_of): the widened weights of a group,
    the ring (one row per image row the window spans along its short axis, each as long as the
    output's taps reach along the long one: a Kx1 window runs along H) and a zero row, 8 bytes
    a pixel; then an int32 tag per ring row. The weights' table has a header per window row and
    an end, 8 bytes each."""
    a, b = ("w", "h") if _dw_along_h(f) else ("h", "w")
    wp = (f[f"out_{b}"] - 1) * f[f"stride_{b}"] + (f[f"k_{b}"] - 1) * f[f"dil_{b}"] + 1
    rows = (f[f"k_{a}"] - 1) * f[f"dil_{a}"] + 1
    return 8 * (f["k_h"] * f["k_w"] + f[f"k_{a}"] + 1) + 8 * (rows + 1) * wp + 4 * rows


def _dw_line(f: dict, pads: tuple) -> bool:
    """Whether rlx_depthwise_conv_line_s8 takes the window: one tap across (no padding there), at
    most 9 along (its unrolled instances), no dilation along it (a word holds two adjacent taps),
    and lines of at least 8 outputs: on shorter ones its per-channel set-up costs more than the
    ring's per-pixel tap walk saves (1x9 on a 4-wide image: 5.0 vs 4.5 instructions/MAC on M4)."""
    along_h = _dw_along_h(f)
    b, across = ("h", pads[2:]) if along_h else ("w", pads[:2])
    one_across = f["k_w" if along_h else "k_h"] == 1 and not any(across)
    return one_across and f[f"k_{b}"] <= 9 and f[f"dil_{b}"] == 1 and f[f"out_{b}"] >= 8


def _dw_line_scratch(f: dict) -> int:
    """rlx_depthwise_conv_line_s8's scratch bytes: 4 int16 planes of the line its taps reach, and a
    pair past it, rounded to words, then 4 int32 accumulators per output of the line, rounded up to
    a multiple of 4 outputs (the last quad of its MACs runs whole), of 8 for windows of 2 to 5 taps
    (more than they write: their steps of two outputs end at the line's last pair); or the ring's,
    which it runs without DSP or with rq_mode 0."""
    b = "h" if _dw_along_h(f) else "w"
    n, k = f[f"out_{b}"], f[f"k_{b}"]
    wp = (n - 1) * f[f"stride_{b}"] + k
    return max(8 * ((wp + 3) & ~1) + 16 * ((n + 7) & ~7 if k <= 5 else (n + 3) & ~3), _dw_ring_scratch(f))


_DW1_SHIFTS = (8, 12, 16)  # rlx_dw1_rq_line's fixed shifts (immediates of its USAT)


def _dw_line_consts(
    bias: np.ndarray, mult: np.ndarray, add: np.ndarray, bound: np.ndarray, zp: int, lo: int, hi: int
) -> np.ndarray:
    """rlx_depthwise_conv_line_s8's dwq on DSP cores (the fast requantization): per group of 4 output
    channels (c0 = 4 i, the last one padded with zeros) 21 words (rlx_dw1_rq): (mult, a, e) per lane, the
    clamp's act_max - act_min and act_min in every byte, the 4 accumulators' starts (bias times f), k,
    then f of lanes 0 and 2 and of 1 and 3 as int16 pairs (the weights' scale). k -1: a group
    rlx_dw1_rq_line may not run (a last group of fewer than 4 channels, or |rq_add| >= 2**29 or e > 21:
    the folded rq_add would leave int32): a = rq_add, f = 2 (the C's doubled accumulators and its
    per-channel output). k 0: a = rq_add - act_min 2**e (act_min folded; not on the saturating rule),
    f = 2. k in _DW1_SHIFTS (the rule without the sign correction, act_min at or above zp): one right
    shift k for the group, the accumulators scaled by f = 2**(d + 1), d = k - e in 1..7 (a scaled int8
    weight stays int16), and SMMLA (no rounding) with a = (rq_add - act_min 2**e) 2**d + 2**(d - 1):
    its numerator is 2**d times SMMLAR's, so the floor shift by k = e + d is the one by e; e is then k.
    Needs the scaled accumulator below 2**31 (bound: |acc| for any input) and SMMLA's sum inside int32."""
    c = bias.size
    g = (c + 3) // 4
    pad = 4 * g - c

    def lanes(v: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(v, np.int64), np.zeros(pad, np.int64)]).reshape(g, 4)

    b, m, a, bd = lanes(bias), lanes(mult), lanes(add), lanes(bound)
    e = np.array([[(int(x) & -int(x)).bit_length() for x in row] for row in a], np.int64)  # rlx_rq_e
    rule = 0 if (lo, hi) == (-128, 127) else 1 if lo < zp else 2
    fold = 0 if rule == 0 else lo
    fast = np.all((e <= 21) & (np.abs(a) < 2**29), axis=1)
    fast[-1] &= pad == 0
    k = np.where(fast, 0, -1)
    f = np.full((g, 4), 2, np.int64)
    a_out, e_out = np.where(fast[:, None], a - (fold << e), a), e.copy()
    for i in np.flatnonzero(fast) if rule == 2 else []:
        for kk in _DW1_SHIFTS:
            d = kk - e[i]
            if np.any(d < 1) or np.any(d > 7):
                continue
            add2 = (a_out[i] << d) + (np.int64(1) << (d - 1))
            reach = bd[i] << (d + 1)  # |the scaled accumulator|
            if np.any(reach >= 2**31) or np.any(np.abs(add2) + (reach * m[i] >> 32) + 1 >= 2**31):
                continue
            k[i], f[i], a_out[i], e_out[i] = kk, np.int64(1) << (d + 1), add2, kk
            break
    hl = np.array([0x01010101 * ((hi - lo) & 0xFF), 0x01010101 * (lo & 0xFF)], np.int64)
    rows = np.concatenate(
        [
            np.stack([m, a_out, e_out], axis=2).reshape(g, 12),
            np.broadcast_to(hl, (g, 2)),
            b * f,
            k[:, None],
            (f[:, 0] | f[:, 2] << 16)[:, None],
            (f[:, 1] | f[:, 3] << 16)[:, None],
        ],
        axis=1,
    )
    return np.ascontiguousarray(fp.wrap_int32(rows.reshape(-1)).astype(np.int32))


def _dw_px(f: dict, pads: tuple, fast: bool) -> bool:
    """Whether the balanced build runs rlx_depthwise_conv_px_s8 (a pixel at a time, 4 channels at once,
    the input read in place) on a layer _dw_pair_gen leaves: depth multipliers 1 and 2 and at least 4
    output channels (fewer take its per-channel loop); more than 4 output pixels of a window the 1-D
    line kernel does not take (on fewer, whose windows are mostly clipped, the generic kernel costs
    less: 5x5 s2 4x4x32, M4 4.21 vs 3.89 instructions/MAC); a 3x3 window (fast: the pair kernel's)
    only on at most 4 output pixels with no padding (6x6x128 s2 valid: 7.19 vs 8.25; 2x2x64 same:
    7.20 vs 6.63). M4 sweep,
    instructions/MAC: 5x5 12x12x24 s2 3.62 -> 2.98, 7x7 14x14x12 s2 2.82 -> 2.45, 1x9 24x4x16 4.50
    -> 3.86, 3x3 d2 12x12x64 4.67 -> 4.08, 3x3 10x10x7 x2 s2 7.96 -> 5.38; the pair kernel stays ahead
    on larger 3x3 images (16x16x16: 2.63 vs 3.92), the line kernel on 9x1 24x4x16 (3.56 vs 4.02)."""
    if f["ch_mult"] > 2 or f["out_c"] < 4:
        return False
    pixels = f["out_h"] * f["out_w"]
    if fast:
        return pixels <= 4 and not any(pads)
    return pixels > 4 and not _dw_line(f, pads)


def _dw_px_scratch(f: dict) -> int:
    """rlx_depthwise_conv_px_s8's scratch bytes: a row run's 4 words and the group's 4 biases, 12 bytes a
    window tap (widened weights, input offset), the requantization (rlx_dwp_rq, 72 bytes), then 4 a
    window's bounds per output row and column, then the same table again for the rows of an output row
    clipped across the walk (rlx_dwp_sub), a byte per output along the walk (its class) and a table per
    class of windows clipped along it (_dw_px_classes); or the ring's, which cores without DSP run."""
    table = 32 + 12 * f["k_h"] * f["k_w"] + 72
    b = "h" if _dw_px_along_h(f) else "w"
    n = f[f"out_{b}"]
    own = 2 * table + 4 * (f["out_h"] + f["out_w"]) + (n + 3) // 4 * 4 + _dw_px_classes(f) * table
    return max(own, _dw_ring_scratch(f))


def _dw_px_along_h(f: dict) -> bool:
    """Whether rlx_depthwise_conv_px_s8 runs its pixels along H: on a tall output, and on a square one
    with a 1xK window (across it)."""
    return f["out_w"] < f["out_h"] or (f["out_w"] == f["out_h"] and f["k_h"] == 1 and f["k_w"] > 1)


def _dw_px_classes(f: dict) -> int:
    """The tables rlx_depthwise_conv_px_s8 keeps for windows clipped along its walk (rlx_dwp_classes): one
    per distinct set of taps inside the image, if there are at most 16 and they take at most 4 KB."""
    b = "h" if _dw_px_along_h(f) else "w"
    k, s, d, n_in = f[f"k_{b}"], f[f"stride_{b}"], f[f"dil_{b}"], f[f"in_{b}"]
    pad = f["pad_top" if b == "h" else "pad_left"]
    classes = set()
    for o in range(f[f"out_{b}"]):
        start = o * s - pad
        lo = next((t for t in range(k) if start + t * d >= 0), k)
        hi = next((t + 1 for t in reversed(range(lo, k)) if start + t * d < n_in), lo)
        if hi - lo != k:
            classes.add((lo, hi))
    table = 32 + 12 * f["k_h"] * f["k_w"] + 72
    return len(classes) if len(classes) <= 16 and len(classes) * table <= 4096 else 0


def _dw_px_consts(bias: np.ndarray, mult: np.ndarray, add: np.ndarray, mode: int, classes: int) -> np.ndarray:
    """rlx_depthwise_conv_px_s8's dwq on DSP cores: the class tables its scratch holds (_dw_px_classes:
    the kernel keeps no more), 3 words 0, then per group of 4 output channels in its order (c0 = 4 i, the
    last one ending at the last channel) 16 words: the 4 biases (doubled for the fast requantization,
    wrapping as the C did), then (mult, rq_add, right shift) of each channel, or (0, 1, 1) with rq_mode 0
    (its C output reads mult and shift)."""
    c = bias.size
    starts = [min(4 * i, c - 4) for i in range((c + 3) // 4)]
    fast = mode != 0
    b = fp.wrap_int32(bias.astype(np.int64) * (2 if fast else 1))
    add = np.asarray(add, np.int64)
    # rlx_rq_e: one more than the trailing zeros of rq_add
    e = np.array([(int(a) & -int(a)).bit_length() for a in add], np.int64) if fast else np.ones(c, np.int64)
    mae = np.stack([mult, add, e] if fast else [np.zeros(c), np.ones(c), e], axis=1).astype(np.int64)
    groups = [np.concatenate([b[c0 : c0 + 4], mae[c0 : c0 + 4].reshape(-1)]) for c0 in starts]
    return np.ascontiguousarray(np.concatenate([[classes, 0, 0, 0], *groups]).astype(np.int32))


def _dw_pair(f: dict) -> bool:
    """Whether the balanced 3x3 runs rlx_depthwise_conv_3x3_pair_s8: strides 1 and 2 (its asm lines),
    at least 2 output pixels (on one, its per-channel set-up costs more than the group ring's per
    group: 1x1x16 s2, M4 20.6 vs 17.6 instructions/MAC; on 2x2 it wins, 6x6x128 s2 valid 8.4 vs 9.6)."""
    return f["stride_h"] <= 2 and f["stride_w"] <= 2 and f["out_h"] * f["out_w"] >= 2


def _dw_pair_scratch(f: dict, c: int) -> int:
    """rlx_depthwise_conv_3x3_pair_s8's scratch bytes: per channel of a block 68 bytes of constants,
    then 3 ring lines (lines outside the image read a slot zeroed in the ring), each the planes of
    the block's groups of 4 channels, wq halfwords a channel (the planes run along the output's
    longer axis; wq: the last output's taps and a pair's word past them, even). A block holds 4 to 32
    channels, its ring lines about 1 KB (2 KB where wq is 20 or less: 8 outputs at stride 2, 16 at
    stride 1, whose set-up per block and line weighs most; 4 KB gave 16x16x32 s2 on M4 2.84
    instructions/MAC instead of 2.92, for 4.5 KB more arena: not taken), or up to 4 KB as a sixteenth of the
    layer's input and output (rlx_depthwise_conv_3x3_pair_s8's cb); constants per output channel
    (depth multiplier 2: two a channel of the block)."""
    a = "h" if f["out_h"] > f["out_w"] else "w"
    s = f[f"stride_{a}"]
    wq = ((f[f"out_{a}"] - 1) * s + 2 + 2 * s + 1) & ~1
    io = (f["in_h"] * f["in_w"] + f["out_h"] * f["out_w"]) * c // 16
    cb = min(c, min(32, max(4, min(max(io, 2048 if wq <= 20 else 1024), 4096) // (24 * wq) * 4)))
    return 68 * f["ch_mult"] * cb + 24 * ((cb + 3) // 4) * wq


def _dw_phases(f: dict) -> list[dict]:
    """The phases rlx_depthwise_conv_3x3_pair_gen_s8 runs a layer as (as its C computes them): per
    output row and column residue modulo the dilation, a 3x3 at stride 1 over the input rows and columns
    of one residue, with its sizes and padding."""
    dh, dw = f["dil_h"], f["dil_w"]

    def axis(o: int, d: int, n_out: int, n_in: int, pad: int) -> tuple[int, int, int]:
        r0 = (o - pad) % d  # the phase's first input row (column)
        return -(-(n_out - o) // d), -(-(n_in - r0) // d), (r0 - o + pad) // d

    out = []
    for py in range(min(dh, f["out_h"])):
        oh, ih, pt = axis(py, dh, f["out_h"], f["in_h"], f["pad_top"])
        for px in range(min(dw, f["out_w"])):
            ow, iw, pl = axis(px, dw, f["out_w"], f["in_w"], f["pad_left"])
            out.append({**f, "in_h": ih, "in_w": iw, "out_h": oh, "out_w": ow, "pad_top": pt, "pad_left": pl,
                        "dil_h": 1, "dil_w": 1})  # fmt: skip
    return out


def _dw_pair_gen(f: dict) -> bool:
    """Whether the balanced build runs a 3x3 the pair kernels do not take on rlx_depthwise_conv_3x3_pair_gen_s8
    (their lines, per phase of a dilation) rather than the pixel kernel: depth multiplier 2 at strides 1
    and 2, and dilations at stride 1 where every phase has 30 outputs or more (the set-up runs per phase).
    M4, instructions/MAC, pixel kernel (or the ring on 4 pixels or fewer) -> pair_gen: multiplier 2 (same
    padding unless valid) 10x10x8 3.68 -> 2.46, 10x10x7 s2 5.06 -> 4.86, 16x16x8 s2 3.78 -> 3.04, 8x8x3
    5.44 -> 3.34, 12x12x16 s2 valid 3.98 -> 3.88, 2x2x8 11.05 -> 7.11, 1x1x16 26.3 -> 15.6, but 7x5x6
    valid 4.53 -> 4.66; d2 same: 12x12x64 3.41 -> 2.63, 16x16x32 3.29 -> 2.66, 20x6x8 3.40 -> 3.17
    (phases of 10x3); phases of 25 or fewer lose: 10x10x16 3.64 -> 3.64, 9x9x12 3.81 -> 3.92, 14x14x8
    d3 3.47 -> 4.08."""
    if f["k_h"] != 3 or f["k_w"] != 3 or f["ch_mult"] > 2:
        return False
    if f["dil_h"] == 1 and f["dil_w"] == 1:
        return f["ch_mult"] == 2 and f["stride_h"] <= 2 and f["stride_w"] <= 2
    s1 = f["stride_h"] == 1 and f["stride_w"] == 1
    return s1 and (f["out_h"] // f["dil_h"]) * (f["out_w"] // f["dil_w"]) >= 30


def _dw_small(f: dict, pads: tuple, rq: tuple) -> bool:
    """Whether the balanced build runs rlx_depthwise_conv_small_s8 (4 output channels of a pixel at once from
    tap pairs, in place; no set-up but the groups' widened weights) rather than a kernel whose per-group or
    per-phase set-up outweighs such a layer's taps: a 3x3 window (any stride, dilation and padding) with
    the fast requantization (rq_mode 1, 2); depth multiplier 2 on at most 25 output pixels (pair_gen's
    phases) with 4 input channels or more; multiplier 1 on at most 4 pixels with no padding (the pixel
    kernel's tables; the pair kernel keeps padded ones) and 16 channels or more. M4 sweep,
    instructions/MAC: 3x3 6x6x128 s2 valid 6.578 -> 2.902, 3x3 10x10x7 x2 s2 same 4.820 -> 2.765. rq:
    (rq_mode, mult, rq_add, the accumulators' bound); rq_add offset by (127 - act_max) 2**shift
    (_dw_small_consts) must keep SMMLAR's sum inside int32, as fast_requant checks the plain one."""
    mode, mult, add, bound = rq
    if f["k_h"] != 3 or f["k_w"] != 3 or mode == 0:
        return False
    add = np.asarray(add, np.int64)
    e = np.array([(int(a) & -int(a)).bit_length() for a in add], np.int64)
    v_max = (np.asarray(bound, np.int64) * np.asarray(mult, np.int64) >> 31) + 2
    if np.any(np.abs(add + ((127 - f["act_max"]) << e)) + v_max + 1 >= 2**31):
        return False
    pixels = f["out_h"] * f["out_w"]
    if f["ch_mult"] == 2:
        return f["in_c"] >= 4 and pixels <= 25
    return f["ch_mult"] == 1 and f["out_c"] >= 16 and pixels <= 4 and not any(pads)


def _dw_small_scratch(f: dict) -> int:
    """rlx_depthwise_conv_small_s8's scratch bytes: 18 words (the walk's constants, the tap offsets), the
    table of a chunk of at most 16 groups of 4 output channels (47 words each), then a copy of the input
    the windows reach with the zero point around it, where they reach past the image (rounded up to 16
    bytes: its fill stores 16 at a time); or the ring's (cores without DSP, more than 4 output pixels)."""
    hp = (f["out_h"] - 1) * f["stride_h"] + (f["k_h"] - 1) * f["dil_h"] + 1
    wp = (f["out_w"] - 1) * f["stride_w"] + (f["k_w"] - 1) * f["dil_w"] + 1
    pt, pl = f["pad_top"], f["pad_left"]
    copy = pt > 0 or pl > 0 or hp - pt > f["in_h"] or wp - pl > f["in_w"]
    groups = f["in_c"] // 2 if f["ch_mult"] == 2 else (f["out_c"] + 3) // 4
    own = 72 + 188 * min(groups, 16) + ((hp * wp * f["in_c"] + 15) // 16 * 16 if copy else 0)
    return max(own, _dw_ring_scratch(f) if f["out_h"] * f["out_w"] > 4 else 0)


# rlx_depthwise_conv_small_s8's tap pairs, after tap 0 alone
_DWS_PAIRS = ((1, 2), (3, 4), (5, 6), (7, 8))


def _dw_small_consts(
    w_taps: np.ndarray, bias_full: np.ndarray, mult: np.ndarray, add: np.ndarray, m: int, in_c: int, lo: int, hi: int
) -> np.ndarray:
    """rlx_depthwise_conv_small_s8's dwq: per group of 4 output channels (multiplier 1: channels 4 i, the
    last group ending at the last channel; multiplier 2: those of input channels 2 i, 2 i + 1) 29 words:
    the doubled biases with the input offset folded in over all 9 taps (wrapping as the C does), tap 0's
    4 weights in one int8 word, per pair of taps (1, 2) ... (7, 8) two int8 words [w0 w1 w0' w1'],
    [w2 w3 w2' w3'], (mult, rq_add + (127 - act_max) 2**shift, right shift) per channel, act_min + 127 -
    act_max and act_max - 127 in every byte, and the input and output bytes to the next group (0 on the
    last). With multiplier 2 and an odd channel count, then 17 words for the last input channel's 2
    outputs: their biases, tap 0's word [w0 0 w1 0], a word [w0 w1 w0' w1'] per pair, their
    requantization, the clamp's 2 words and 2 zeros."""
    k, cm = w_taps.shape
    wt = np.zeros((9, cm), np.int64)
    wt[:k] = w_taps  # taps past the window: zero weights
    if m == 1:
        starts = [min(4 * g, cm - 4) for g in range((cm + 3) // 4)]
    else:
        starts = [2 * g for g in range(in_c // 2)]
    e = np.array([(int(a) & -int(a)).bit_length() for a in add], np.int64)  # rlx_rq_e
    # outputs offset by 127 - hi: SSAT's saturation at 127 is the clamp at hi (_dw_small checks int32)
    add = np.asarray(add, np.int64) + ((127 - hi) << e)
    b2 = fp.wrap_int32(2 * bias_full.astype(np.int64))
    bounds = [np.array([b & 0xFF] * 4, np.uint8).view("<i4")[0] for b in (lo + 127 - hi, hi - 127)]
    groups = []
    for g, i0 in enumerate(starts):
        c0 = m * i0
        w4 = wt[:, c0 : c0 + 4]
        words = [w4[0]] + [w4[[t, t, u, u, t, t, u, u], [0, 1, 0, 1, 2, 3, 2, 3]] for t, u in _DWS_PAIRS]
        entries = np.concatenate(words).astype(np.int8).view("<i4").astype(np.int64)
        mae = np.stack([mult[c0 : c0 + 4], add[c0 : c0 + 4], e[c0 : c0 + 4]], axis=1).astype(np.int64).reshape(-1)
        step = starts[g + 1] - i0 if g + 1 < len(starts) else 0
        tail = np.array([*bounds, step, m * step], np.int64)
        groups.append(np.concatenate([b2[c0 : c0 + 4], entries, mae, tail]))
    if m == 2 and in_c % 2:
        # the last input channel's 2 outputs: tap 0's word [w0 0 w1 0], a word [w0 w1 w0' w1'] per pair
        c0 = cm - 2
        w2 = wt[:, c0:]
        first = np.array([w2[0, 0], 0, w2[0, 1], 0])
        pairs = [w2[[t, t, u, u], [0, 1, 0, 1]] for t, u in _DWS_PAIRS]
        words = np.concatenate([first, *pairs]).astype(np.int8).view("<i4").astype(np.int64)
        mae = np.stack([mult[c0:], add[c0:], e[c0:]], axis=1).astype(np.int64).reshape(-1)
        groups.append(np.concatenate([b2[c0:], words, mae, [*bounds, 0, 0]]))
    return np.ascontiguousarray(np.concatenate(groups).astype(np.int32))


@RULES.rule("depthwise_conv2d")
def _depthwise(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, wv, bv = _weighted(graph, node)
    wt = _t(graph, node.inputs[1])
    _need(wt.dtype in WEIGHT_DTYPES and not np.any(wt.quant.zero_point), node, "needs symmetric int8 or int4 weights")
    zp_x, zp_y = params.in_zp, params.out_zp
    _, kh, kw, cm = wv.shape
    m = node.attrs["depth_multiplier"]
    c = _shape(_t(graph, x))[3]
    if c == 1 and m > 1:
        # One input channel to M outputs is a dense convolution (micro_speech's and person_detect's
        # first layers): the same taps meet the same weights, on the GEMM kernel.
        return _conv_layer(graph, node, params, np.ascontiguousarray(wv.transpose(3, 1, 2, 0)), bv)
    mult, shift, lo, hi = params.mult, params.shift, params.act_min, params.act_max
    bias = np.zeros(cm, np.int32) if bv is None else bv.astype(np.int32)
    w_taps = wv.reshape(kh * kw, cm).astype(np.int64)
    # |acc| for any input: |bias| + 255 * sum |w| (x - zp spans at most 255)
    bound = np.abs(bias.astype(np.int64)) + 255 * np.abs(w_taps).sum(axis=0)
    # (x + in_offset) spans [-128 - zp_x, 127 - zp_x] (0, a padded tap, included)
    ends = np.stack([w_taps * (-128 - zp_x), w_taps * (127 - zp_x)])
    acc_lo = bias.astype(np.int64) + ends.min(axis=0).sum(axis=0)
    acc_hi = bias.astype(np.int64) + ends.max(axis=0).sum(axis=0)
    mode, mult, add, rshift = _requant(mult, shift, bound, acc_lo, acc_hi, zp_y, lo, hi)
    # a pixel whose taps are all inside the image: the input offset folded
    # into the bias (portable path); wraps like the C accumulation
    bias_full = fp.wrap_int32(folded_bias(params, w_taps.sum(axis=0), bv)).astype(np.int32)
    fields = {
        **_image_fields(graph, node),
        "out_c": cm,
        "ch_mult": m,
        **_window_fields(node, kh, kw, params.pads),
        "in_offset": -zp_x,
        "out_zp": zp_y,
        "act_min": lo,
        "act_max": hi,
        "rq_mode": mode,
        "weights": Const("weights"),
        "weights16": None,
        "weights9": None,
        "bias": Const("bias"),
        "bias_full": None,
        "mult": Const("mult"),
        "shift": Const("shift") if mode == 0 else None,
        "rq_add": Const("rq_add") if mode != 0 else None,
        "weights16x2": None,
        "dwq": None,
        "pad3": None,
    }
    # one array per channel besides the multiplier, as _gemm's
    consts = {"weights": np.ascontiguousarray(wv.reshape(-1)), "bias": bias, "mult": mult.astype(np.int32)}
    consts["shift" if mode == 0 else "rq_add"] = (rshift if mode == 0 else add).astype(np.int32)
    guards = {}
    optimize = _OPTIMIZE.get()
    # size: the generic kernel only; balanced: the 3x3 kernel, and the ring kernel for every other
    # window, on the same int8 arrays
    fast = kh == 3 and kw == 3 and m == 1 and tuple(node.attrs["dilations"]) == (1, 1) and optimize != "size"
    if fast and optimize == "speed":
        # portable path, pixels with all 9 taps inside: bias with the offset
        # folded in, and each channel's 9 weights together
        fields["bias_full"] = Const("bias_full")
        fields["weights9"] = Const("weights9")
        consts["bias_full"] = bias_full
        consts["weights9"] = np.ascontiguousarray(w_taps.T.astype(np.int8)).reshape(-1)
        guards["bias_full"] = guards["weights9"] = "portable"
        if cm % 4 == 0:
            # DSP path: int16 weights per group of 4 channels and tap, in the
            # order SXTB16 / SXTB16 ROR 8 give the input (c0, c2, c1, c3)
            w16 = w_taps.reshape(kh * kw, cm // 4, 4)[:, :, [0, 2, 1, 3]].transpose(1, 0, 2)
            if mode == 0:
                fields["weights16"] = Const("weights16")
                consts["weights16"] = np.ascontiguousarray(w16.astype(np.int16)).reshape(-1)
                guards["weights16"] = "dsp"
            else:
                # the fast requantization takes acc << 1: accumulate it doubled
                # (|2 acc| < 2**31 by fast_requant's bound; partial sums wrap
                # like the core's). The input offset is folded into the bias
                # of the taps each pixel computes: all 9, or a clipped left or
                # right column left out; rows outside the image read pad3.
                fields.update(weights16x2=Const("weights16x2"), dwq=Const("dwq"), pad3=Const("pad3"))
                consts["weights16x2"] = np.ascontiguousarray((2 * w16).astype(np.int16)).reshape(-1)
                g4 = cm // 4
                cols = w_taps.reshape(3, 3, cm).sum(axis=0)  # [j][c]
                sums = np.stack([cols.sum(axis=0), cols[1] + cols[2], cols[0] + cols[1]])  # [3][c]
                b2 = fp.wrap_int32(2 * folded_bias(params, sums, bv))
                dwq = np.concatenate(
                    [
                        b2.reshape(3, g4, 4).transpose(1, 0, 2).reshape(g4, 12),
                        np.stack([mult, add], axis=-1).astype(np.int64).reshape(g4, 8),
                        np.asarray(rshift, np.int64).reshape(g4, 4),
                    ],
                    axis=1,
                )
                consts["dwq"] = np.ascontiguousarray(dwq.astype(np.int32)).reshape(-1)
                consts["pad3"] = np.full(3 * c, zp_x, np.int8)
                guards["weights16x2"] = guards["dwq"] = guards["pad3"] = "dsp"
    if optimize == "balanced" and _dw_small(fields, params.pads, (mode, mult, add, bound)):
        # DSP cores: no set-up but a group's widened weights; the others the general kernel or the ring
        args = [("in", 0), ("out", 0), ("scratch", "int16_t")]
        fields["dwq"] = Const("dwq")
        consts["dwq"] = _dw_small_consts(w_taps, bias_full, mult, add, m, c, lo, hi)
        guards["dwq"] = "dsp"
        for key in ("weights", "bias", "mult", "rq_add"):
            guards[key] = "portable"
        return Layer("rlx_depthwise_conv_small_s8", "rlx_dw_conv_params", fields, consts, args,
                     _dw_small_scratch(fields), guards)  # fmt: skip
    if optimize == "balanced" and _dw_pair_gen(fields):
        # DSP cores: the pair kernel's lines (per phase of a dilation); the others the ring, in the larger scratch
        scratch = max([_dw_ring_scratch(fields)] + [_dw_pair_scratch(ph, c) for ph in _dw_phases(fields)])
        args = [("in", 0), ("out", 0), ("scratch", "int16_t")]
        return Layer("rlx_depthwise_conv_3x3_pair_gen_s8", "rlx_dw_conv_params", fields, consts, args, scratch, guards)
    # balanced, small images and windows other than 3x3 (rules: _dw_px): a pixel at a time
    if optimize == "balanced" and _dw_px(fields, params.pads, fast):
        args = [("in", 0), ("out", 0), ("scratch", "int16_t")]
        fields["dwq"] = Const("dwq")
        consts["dwq"] = _dw_px_consts(bias, mult, add, mode, _dw_px_classes(fields))
        # DSP cores read the biases and the fast requantization from dwq alone (rq_mode 0 reads mult and
        # shift in C); cores without DSP run the ring or the generic kernel on the arrays
        guards["dwq"] = "dsp"
        for key in ("bias",) if mode == 0 else ("bias", "mult", "rq_add"):
            guards[key] = "portable"
        return Layer("rlx_depthwise_conv_px_s8", "rlx_dw_conv_params", fields, consts, args, _dw_px_scratch(fields),
                     guards)  # fmt: skip
    # balanced, at most 4 output pixels of a 2-D window the ring would take (depth multiplier 1):
    # the generic kernel, which reads each pixel's taps from the image and widens them in
    # registers; the ring's set-up per group (widened weights, rows) costs more than such layers'
    # taps (5x5 s2 4x4x32, instructions/MAC: M4 6.91 -> 3.89, M3 12.04 -> 8.49)
    few = not fast and fields["out_h"] * fields["out_w"] <= 4 and m == 1 and kh > 1 and kw > 1
    if not fast and (optimize == "size" or (few and optimize == "balanced")):
        return Layer("rlx_depthwise_conv_s8", "rlx_dw_conv_params", fields, consts, [("in", 0), ("out", 0)], 0, guards)
    if not fast:
        args = [("in", 0), ("out", 0), ("scratch", "int16_t")]
        if _dw_line(fields, params.pads):
            if mode != 0:
                # DSP cores read the biases and the requantization from dwq alone (rq_mode 0 runs the
                # ring on the arrays); cores without DSP run the ring on the arrays
                fields["dwq"] = Const("dwq")
                consts["dwq"] = _dw_line_consts(bias, mult, add, bound, zp_y, lo, hi)
                guards["dwq"] = "dsp"
                for key in ("bias", "mult", "rq_add"):
                    guards[key] = "portable"
            return Layer("rlx_depthwise_conv_line_s8", "rlx_dw_conv_params", fields, consts, args,
                         _dw_line_scratch(fields), guards)  # fmt: skip
        ring = _dw_ring_scratch(fields)
        return Layer("rlx_depthwise_conv_ring_s8", "rlx_dw_conv_params", fields, consts, args, ring, guards)
    kernel = "rlx_depthwise_conv_3x3_wide_s8" if optimize == "speed" else "rlx_depthwise_conv_3x3_s8"
    # the ring of 3 widened input rows of one group of 4 channels (rlx_dw_row) and a row of
    # zeros: 8 bytes a pixel, from the first column the output's taps reach to the last
    ring = 4 * 8 * ((fields["out_w"] - 1) * fields["stride_w"] + 3)
    args = [("in", 0), ("out", 0), ("scratch", "int16_t")]
    if optimize == "balanced" and _dw_pair(fields):
        # DSP cores: the channel-planar ring (SMLAD on tap pairs); the others run the kernel above
        # inside it, so the scratch is the larger of the two. The clamp's lines (rq_mode 1) are a
        # kernel of their own: a model without such a layer does not link them. The saturating
        # lines leave out the requantization's sign correction, exact only where out_zp is -128
        # (what they change saturates to -128 anyway): rq_mode 2 with another out_zp is clamped
        clamp = mode == 1 or (mode == 2 and zp_y != -128)
        pair = "rlx_depthwise_conv_3x3_pair_clamp_s8" if clamp else "rlx_depthwise_conv_3x3_pair_s8"
        return Layer(pair, "rlx_dw_conv_params", fields, consts, args, max(ring, _dw_pair_scratch(fields, c)), guards)
    return Layer(kernel, "rlx_dw_conv_params", fields, consts, args, ring, guards)


@RULES.rule("fully_connected")
def _fc(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, wv, bv = _weighted(graph, node)
    gemm, consts, scratch = _gemm(graph, node, params, wv, bv)
    xs = _shape(_t(graph, x))
    fields = {"gemm": gemm, "batches": math.prod(xs[:-1]), "in_features": xs[-1]}
    # one row at a time, the int8 input read (and on DSP cores widened in
    # registers) directly: no scratch
    del scratch
    args = [("in", 0), ("out", 0)]
    k, o, mode = xs[-1], gemm["out_c"], gemm["rq_mode"]
    if 4 <= k <= 8 and o >= 2 and mode != 0:
        # the whole row in 4 registers, 2 rows at a time: the block kernel's call, per-block and
        # partial-quad set-up would be most of such a layer's instructions
        gemm.update(weights=None, chan=Const("chan"))
        consts = {"chan": fc_small_stream(wv, consts["chan"], gemm["act_min"], gemm["act_max"])}
        kernel = "rlx_fc_small_clamp_s8" if mode == 1 else "rlx_fc_small_s8"
        return Layer(kernel, "rlx_fc_params", fields, consts, args, 0)
    return Layer("rlx_fully_connected_s8", "rlx_fc_params", fields, consts, args, 0)


def fc_small_stream(w2: np.ndarray, chan: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """rlx_fc_small_s8's one array (kernels/rlx_convolve_s8.c) for weights [O, K], 4 <= K <= 8, and
    _gemm's per-block constants ``chan``: a header, then per pair of rows their biases (the even
    row's + 256 x the odd row's, as ``chan``), their 4 weight words and per row (mult, rq_add,
    ctz(rq_add)); an odd last row alone. The second quad is the last 4 inputs: the ones the
    first quad already holds get weight 0 there."""
    o, k = w2.shape
    w8 = np.zeros((o, 8), np.int64)
    w8[:, :4] = w2[:, :4]
    w8[:, 8 - (k - 4) :] = w2[:, 4:]
    # [block][quad][word]: words 0 and 2 of a quad are rows 0-1's (k0, k2) and (k1, k3), 1 and 3 rows 2-3's
    words = np.frombuffer(gemm_weight_layout(w8).tobytes(), "<i4").reshape(-1, 2, 4).astype(np.int64)
    ch = chan.astype(np.int64).reshape(-1, 12)

    def lanes(v: int) -> int:  # the byte v in all 4 lanes of an int32
        u = (v & 0xFF) * 0x01010101
        return u - (1 << 32) if u >= 1 << 31 else u

    out = [k - 4, lanes(lo), lanes(hi), o - 1, 0x01000100]
    for r in range(0, o, 2):
        b, j = divmod(r, 4)
        rows = range(r, min(r + 2, o))
        out += [int(ch[b, j + i]) for i in range(len(rows))]
        out += [int(words[b, q, 2 * h + j // 2]) for q in range(2) for h in range(2)]
        for t in rows:
            m, add = int(ch[t // 4, 4 + 2 * (t % 4)]), int(ch[t // 4, 5 + 2 * (t % 4)])
            out += [m, add, (add & -add).bit_length() - 1]
    return np.asarray(out, np.int32)


# pooling -----------------------------------------------------------------------------------
@RULES.rule("avg_pool2d", "max_pool2d", "global_avg_pool")
def _pool(graph: Graph, node: Node, params: Prepared) -> Layer:
    x = node.inputs[0]
    _int8(graph, node, x, node.outputs[0])
    p = params
    n, h, w, c = _shape(_t(graph, x))
    _, oh, ow, _ = _shape(_t(graph, node.outputs[0]))
    fields = {
        "batches": n,
        "in_h": h,
        "in_w": w,
        "ch": c,
        "out_h": oh,
        "out_w": ow,
        "k_h": p.kernel[0],
        "k_w": p.kernel[1],
        "stride_h": p.strides[0],
        "stride_w": p.strides[1],
        "pad_top": p.pads[0],
        "pad_left": p.pads[2],
        "act_min": p.act_min,
        "act_max": p.act_max,
    }
    if node.op == "max_pool2d":
        return Layer("rlx_maxpool_s8", "rlx_pool_params", fields, {}, [("in", 0), ("out", 0)])
    args = [("in", 0), ("out", 0), ("scratch", "int32_t")]
    return Layer("rlx_avgpool_s8", "rlx_pool_params", fields, {}, args, 4 * c)


# elementwise ---------------------------------------------------------------------------------
def _broadcast_strides(shape: tuple[int, ...], o4: tuple[int, ...]) -> list[int]:
    """Element strides of an input of ``shape`` read at every index of the 4-d output ``o4`` (0: broadcast)."""
    s4 = (1,) * (4 - len(shape)) + shape
    st, acc = [0] * 4, 1
    for d in range(3, -1, -1):
        st[d] = 0 if s4[d] == 1 and o4[d] != 1 else acc
        acc *= s4[d]
    return st


def _broadcast_fields(graph: Graph, node: Node) -> dict:
    out = _shape(_t(graph, node.outputs[0]))
    _need(len(out) <= 4, node, "broadcasts over at most 4 dimensions")
    o4 = (1,) * (4 - len(out)) + out

    def strides(v: str) -> list[int]:
        return _broadcast_strides(_shape(_t(graph, v)), o4)

    a, b = node.inputs
    same = _shape(_t(graph, a)) == out and _shape(_t(graph, b)) == out
    geo = {"size": math.prod(out), "broadcast": 0 if same else 1, "out_shape": list(o4)}
    return {"geo": {**geo, "a_strides": strides(a), "b_strides": strides(b)}}  # rlx_broadcast2


def _select_fields(graph: Graph, node: Node) -> dict[str, Any]:
    """SELECT_V2's walk, both widths: the output's size and 4-d shape, the condition's, x's and y's strides."""
    out = _shape(_t(graph, node.outputs[0]))
    _need(len(out) <= 4, node, "broadcasts over at most 4 dimensions")
    o4 = (1,) * (4 - len(out)) + out
    geo: dict[str, Any] = {"size": math.prod(out), "out_shape": list(o4)}
    for key, v in zip("cxy", node.inputs):
        geo[f"{key}_strides"] = _broadcast_strides(_shape(_t(graph, v)), o4)
    return {"geo": geo}  # rlx_broadcast3


def _binary_layer(
    graph: Graph, node: Node, kernel: str, p: Prepared, a_zp: int, b_zp: int, rescale: dict, **tail
) -> Layer:
    """A kernel of two broadcast int8 operands: the geometry, the input offsets, the kernel's ``rescale``
    fields, the output zero point and clamp, then ``tail`` (the order of ``rlx_binary_params``'s initializer)."""
    fields = _broadcast_fields(graph, node)
    fields.update(a_offset=-a_zp, b_offset=-b_zp, **rescale, out_zp=p.out_zp, act_min=p.act_min, act_max=p.act_max)
    fields.update(tail)
    return Layer(kernel, "rlx_binary_params", fields, {}, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("add", "sub")
def _add(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates both inputs' rescaling (the second negated for sub); the kernel sums
    two lookups and requantizes, in the fast form where fast_requant proves it for the tables' range."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    _need("a_table" in p, node, "needs byte inputs (the op's prepare tabulates their rescaling)")
    bound = int(np.abs(p.a_table.astype(np.int64)).max() + np.abs(p.b_table.astype(np.int64)).max())
    mode, add, rshift = fast_requant(
        np.array([p.out_mult]), np.array([p.out_shift]), np.array([bound]), p.out_zp, p.act_min, p.act_max
    )
    rescale = dict(out_mult=p.out_mult, out_shift=p.out_shift)
    tail = dict(a_table=Const("a_table"), b_table=Const("b_table"), rq_mode=mode, rq_add=int(add[0]),
                rq_shift=int(rshift[0]))  # fmt: skip
    layer = _binary_layer(graph, node, "rlx_add_s8", p, p.a_zp, p.b_zp, rescale, **tail)
    layer.consts.update(a_table=p.a_table, b_table=p.b_table)
    return layer


@RULES.rule("mul")
def _mul(graph: Graph, node: Node, params: Prepared) -> Layer:
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    rescale = dict(out_mult=p.out_mult, out_shift=p.out_shift)
    return _binary_layer(graph, node, "rlx_mul_s8", p, p.a_zp, p.b_zp, rescale)


@RULES.rule("prelu")
def _prelu(graph: Graph, node: Node, params: Prepared) -> Layer:
    """x >= 0: x rescaled by the identity multiplier (a_*); else x * alpha rescaled by the alpha one (out_*)."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    rescale = dict(a_mult=p.id_mult, a_shift=p.id_shift, out_mult=p.alpha_mult, out_shift=p.alpha_shift)
    return _binary_layer(graph, node, "rlx_prelu_s8", p, p.x_zp, p.alpha_zp, rescale)


_COMPARE_CODES = {"equal": 0, "not_equal": 1, "greater": 2, "greater_equal": 3, "less": 4, "less_equal": 5}


@RULES.rule(*_COMPARE_CODES)
def _compare(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates each input's rescaled value; the kernel compares two lookups (bool out)."""
    _int8(graph, node, *node.inputs)
    fields = {**_broadcast_fields(graph, node), "op": _COMPARE_CODES[node.op]}
    fields.update(a_table=Const("a_table"), b_table=Const("b_table"))
    consts = {"a_table": params.a_table, "b_table": params.b_table}
    return Layer("rlx_compare_s8", "rlx_compare_params", fields, consts, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("while_")
def _while(graph: Graph, node: Node, params: Prepared) -> Layer:
    """A C while loop over the cond and body subgraphs' own layers, run in this node's scratch (emit.py)."""
    from rlx_edge.targets.cortexm._control import WHILE_KERNEL, subgraph_scratch  # plans through the pipeline

    return Layer(WHILE_KERNEL, scratch=subgraph_scratch(node))


@RULES.rule("if_")
def _if(graph: Graph, node: Node, params: Prepared) -> Layer:
    """A C if over the two branches' own layers, run in this node's scratch (emit.py): the branch not
    taken costs nothing, where lowering to both branches and a select ran both."""
    from rlx_edge.targets.cortexm._control import IF_KERNEL, subgraph_scratch  # plans through the pipeline

    return Layer(IF_KERNEL, scratch=subgraph_scratch(node))


_LOGICAL_CODES = {"logical_and": 0, "logical_or": 1, "logical_not": 2}  # kernels/rlx_logical.h


@RULES.rule(*_LOGICAL_CODES)
def _logical(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Bools (one byte each) in and out: and / or broadcast like the binary kernels; not reads one operand."""
    if node.op == "logical_not":
        size = math.prod(_shape(_t(graph, node.outputs[0])))
        geo = {"size": size, "broadcast": 0, "out_shape": [1, 1, 1, size], "a_strides": [0, 0, 0, 1],
               "b_strides": [0, 0, 0, 1]}  # fmt: skip
        fields, args = {"geo": geo}, [("in", 0), ("in", 0), ("out", 0)]
    else:
        fields, args = _broadcast_fields(graph, node), [("in", 0), ("in", 1), ("out", 0)]
    fields["op"] = _LOGICAL_CODES[node.op]
    return Layer("rlx_logical", "rlx_logical_params", fields, {}, args)


@RULES.rule("squared_difference")
def _squared_difference(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates each input's scaled value (the second negated); the kernel squares
    the sum of two lookups and requantizes."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    fields = _broadcast_fields(graph, node)
    fields.update(a_table=Const("a_table"), b_table=Const("b_table"), out_mult=p.out_mult, out_shift=p.out_shift,
                  out_zp=p.out_zp, act_min=p.act_min, act_max=p.act_max)  # fmt: skip
    consts = {"a_table": p.a_table, "b_table": p.b_table}
    return Layer("rlx_arith_s8", "rlx_arith_params", fields, consts, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("div")
def _div(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates the divisor's reciprocal, its shift and sign by bit pattern; the kernel
    does the rest of TFLite Micro's DivElementwise."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    fields = _broadcast_fields(graph, node)
    fields.update(a_offset=-p.a_zp, b_inv=Const("b_inv"), b_shift=Const("b_shift"), b_neg=Const("b_neg"),
                  out_mult=p.out_mult, out_shift=p.out_shift, out_zp=p.out_zp, act_min=p.act_min,
                  act_max=p.act_max)  # fmt: skip
    consts = {"b_inv": p.b_inv, "b_shift": p.b_shift, "b_neg": p.b_neg}
    return Layer("rlx_div_s8", "rlx_div_params", fields, consts, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("cumsum")
def _cumsum(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates each byte's rescaled value; the kernel runs the sums and requantizes."""
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x, y)
    p = params
    _need(-31 <= p.out_shift <= 0, node, "needs an output multiplier below one (TFLite's CUMSUM requires it)")
    shape = _shape(_t(graph, x))
    axis = node.attrs["axis"] % len(shape)
    fields = {"outer": math.prod(shape[:axis]), "depth": shape[axis], "inner": math.prod(shape[axis + 1 :]),
              "exclusive": int(node.attrs["exclusive"]), "reverse": int(node.attrs["reverse"]),
              "table": Const("table"), "start": p.start, "out_mult": p.out_mult, "out_shift": p.out_shift,
              "out_zp": p.out_zp, "act_min": p.out_min, "act_max": p.out_max}  # fmt: skip
    return Layer("rlx_cumsum_s8", "rlx_cumsum_params", fields, {"table": p.table}, [("in", 0), ("out", 0)])


@RULES.rule("matmul")
def _matmul(graph: Graph, node: Node, params: Prepared) -> Layer:
    """TFLite's BATCH_MATMUL, int8 or int16 (both operands the output's type): each output matrix's
    operands found through per-matrix offsets, which carry the broadcasting of the batch dimensions."""
    a, b = node.inputs
    y = node.outputs[0]
    wide = _t(graph, y).dtype == DType.i16
    (_int16 if wide else _int8)(graph, node, a, b, y)
    sa, sb = _shape(_t(graph, a)), _shape(_t(graph, b))
    sa = (1, *sa) if len(sa) == 1 else sa  # numpy's vectors: a row, a column; the same bytes
    sb = (*sb, 1) if len(sb) == 1 else sb
    rows, depth, cols = sa[-2], sa[-1], sb[-1]
    lead = np.broadcast_shapes(sa[:-2], sb[:-2])

    def starts(shape: tuple[int, ...], size: int) -> np.ndarray:
        index = np.arange(math.prod(shape[:-2]), dtype=np.int64).reshape(shape[:-2])
        return (np.broadcast_to(index, lead).reshape(-1) * size).astype(np.int32)

    p = params
    if wide:
        _need(p.shift <= 14, node, "takes int16 multipliers up to 2**14 (TFLite's int64 requantization)")
    fields = {"batches": math.prod(lead), "rows": rows, "depth": depth, "cols": cols, "a_starts": Const("a_starts"),
              "b_starts": Const("b_starts"), "a_offset": -p.a_zp, "b_offset": -p.b_zp, "out_mult": p.mult,
              "out_shift": p.shift, "out_zp": p.out_zp, "act_min": p.act_min, "act_max": p.act_max}  # fmt: skip
    consts = {"a_starts": starts(sa, rows * depth), "b_starts": starts(sb, depth * cols)}
    kernel = "rlx_batch_matmul_s16" if wide else "rlx_batch_matmul_s8"
    return Layer(kernel, "rlx_batch_matmul_params", fields, consts, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("add_n")
def _add_n(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates each input's scaled value; the kernel sums the lookups and requantizes."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    p = params
    fields = {"size": math.prod(_shape(_t(graph, node.outputs[0]))), "n_inputs": len(node.inputs),
              "tables": Const("tables"), "start": p.start, "out_mult": p.out_mult, "out_shift": p.out_shift,
              "out_zp": p.out_zp, "act_min": p.act_min, "act_max": p.act_max}  # fmt: skip
    return Layer("rlx_add_n_s8", "rlx_add_n_params", fields, {"tables": p.tables}, [("ins",), ("out", 0)])


@RULES.rule("select_v2")
def _select_v2(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The condition picks x or y, each mapped through its table (the stored values, or requantized)."""
    _int8(graph, node, *node.inputs[1:], node.outputs[0])
    fields = _select_fields(graph, node)
    fields.update(x_table=Const("x_table"), y_table=Const("y_table"))
    consts = {"x_table": params.x_table, "y_table": params.y_table}
    args = [("in", 0), ("in", 1), ("in", 2), ("out", 0)]
    return Layer("rlx_select_s8", "rlx_select_params", fields, consts, args)


@RULES.rule("maximum", "minimum")
def _minmax(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The larger (smaller) of the operands' output-parameter bytes, each looked up in its table."""
    _int8(graph, node, *node.inputs, node.outputs[0])
    fields = {**_broadcast_fields(graph, node), "op": 0 if node.op == "maximum" else 1}
    fields.update(a_table=Const("a_table"), b_table=Const("b_table"))
    consts = {"a_table": params.a_table, "b_table": params.b_table}
    return Layer("rlx_minmax_s8", "rlx_minmax_params", fields, consts, [("in", 0), ("in", 1), ("out", 0)])


@RULES.rule("resize_bilinear")
def _resize_bilinear(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The rows, columns and 1/1024 weights each output pixel reads come from the op's prepare."""
    _int8(graph, node, node.inputs[0], node.outputs[0])
    n, h, w, c = _shape(_t(graph, node.inputs[0]))
    _, oh, ow, _ = _shape(_t(graph, node.outputs[0]))
    keys = ("y0", "y1", "dy", "x0", "x1", "dx")
    fields = {"batches": n, "in_h": h, "in_w": w, "channels": c, "out_h": oh, "out_w": ow}
    fields.update({k: Const(k) for k in keys})
    consts = {k: np.asarray(params[k], np.int32) for k in keys}
    args = [("in", 0), ("out", 0)]
    return Layer("rlx_resize_bilinear_s8", "rlx_resize_bilinear_params", fields, consts, args)


@RULES.rule(
    "relu",
    "relu6",
    "clamp",
    "sigmoid",
    "tanh",
    "hard_swish",
    "leaky_relu",
    "elu",
    "gelu",
    "silu",
    "abs",
    "rsqrt",
    "dequantize",
)
def _lut(graph: Graph, node: Node, params: Prepared) -> Layer:
    # the op's prepare tabulates its eval over every byte input (indexed by bit pattern)
    table = params.get("table")
    xt = _t(graph, node.inputs[0])
    _need(table is not None, node, f"needs a byte input quantized per tensor on both sides, got {xt.dtype}")
    size = math.prod(_shape(_t(graph, node.outputs[0])))
    _need(table.dtype.itemsize in (1, 2, 4), node, f"cannot map bytes to {table.dtype}")
    fields = {"size": size, "table": Const("table"), "out_bytes": table.dtype.itemsize}
    return Layer("rlx_lut_8", "rlx_lut_params", fields, {"table": table}, [("in", 0), ("out", 0)])


def _softmax_mask(graph: Graph, node: Node, shape: tuple[int, ...]) -> tuple[dict[str, Any], tuple]:
    """The mask's walk and its call argument: a constant mask is read from flash, a computed one from the
    arena, each as stored (one byte per position, broadcast by strides); no mask passes NULL."""
    mask = node.inputs[1] if len(node.inputs) > 1 else None
    if mask is None:
        return {"dims": [1, 1], "strides": [0, 0, 0, 0]}, ("bytes", 0)
    _need(len(shape) <= 4, node, f"takes a mask over at most 4 dimensions, got {len(shape)}")
    o4 = (1,) * (4 - len(shape)) + shape
    return {"dims": [o4[1], o4[2]], "strides": _broadcast_strides(_shape(_t(graph, mask)), o4)}, ("in", 1)


@RULES.rule("softmax")
def _softmax(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x)
    xt, yt = _t(graph, x), _t(graph, y)
    _need(yt.dtype.numpy in (np.int8, np.int16), node, "supports int8 and int16 softmax outputs")
    shape = _shape(xt)
    axis = node.attrs["axis"] % len(shape)
    _need(axis == len(shape) - 1, node, "normalizes the innermost axis only")
    # the kernel indexes exps by difference to the row max from -255 up to 0; the op's table by -difference
    table = np.ascontiguousarray(params.exp_table[::-1], dtype=np.int32)
    depth = shape[-1]
    walk, mask_arg = _softmax_mask(graph, node, shape)
    fields = {
        "rows": math.prod(shape) // max(depth, 1),
        "depth": depth,
        "exp_table": Const("exp"),
        "out_zp": params.out_min,
        "out_bits": params.out_bits,
        "mask": walk,
    }
    if mask_arg[0] == "bytes":  # no mask: the kernel without mask code (the flash of small parts)
        return Layer("rlx_softmax_s8", "rlx_softmax_params", fields, {"exp": table}, [("in", 0), ("out", 0)])
    args = [("in", 0), mask_arg, ("out", 0)]
    return Layer("rlx_softmax_masked_s8", "rlx_softmax_params", fields, {"exp": table}, args)


@RULES.rule("svdf")
def _svdf(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The state in, its update out (the op is functional); int8 input and output, int8 or int16 state."""
    x, _, wt, state = node.inputs[:4]
    bias = node.inputs[4] if len(node.inputs) > 4 else None
    _int8(graph, node, x, node.outputs[0])
    st = _t(graph, state)
    _need(st.dtype in (DType.i8, DType.i16), node, f"needs an int8 or int16 state ({state} is {st.dtype})")
    batch, n_in = _shape(_t(graph, x))
    filters, memory = _shape(_t(graph, wt))
    rank = node.attrs["rank"]
    p = params
    fields = {
        "batch": batch, "inputs": n_in, "units": filters // rank, "rank": rank, "memory": memory,
        "state_bytes": st.dtype.storage_bytes, "in_zp": p.in_zp, "state_zp": p.state_zp, "out_zp": p.out_zp,
        "feature_mult": p.feature_mult, "feature_shift": p.feature_shift, "out_mult": p.out_mult,
        "out_shift": p.out_shift, "state_min": p.state_min, "state_max": p.state_max, "has_bias": int(bias is not None),
    }  # fmt: skip
    # without a bias the kernel's pointer is a literal 0 (a null pointer; has_bias says it is not read)
    bias_arg = ("in", 4) if bias is not None else ("bytes", 0)
    args = [("in", 0), ("in", 1), ("in", 2), ("in", 3), bias_arg, ("out", 0), ("out", 1)]
    return Layer("rlx_svdf_s8", "rlx_svdf_params", fields, {}, args)


@RULES.rule("lstm")
def _lstm(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Hidden and cell state in, their updates out (the op is functional); int8 or int16x8 activations."""
    x, hidden = node.inputs[0], node.inputs[13]
    wide = _t(graph, x).dtype == DType.i16
    (_int16 if wide else _int8)(graph, node, x, hidden, node.outputs[0])
    p = params
    if wide:  # the int64 requantization shifts right by 15 - shift, at least once
        _need(max(*p.x_shift, *p.h_shift) <= 14, node, "needs gate multipliers below 2**14 (int16x8 sums)")
    xs = _shape(_t(graph, x))
    time_major = bool(node.attrs["time_major"])
    steps, batch = xs[:2] if time_major else xs[1::-1]
    state = _shape(_t(graph, hidden))[1]
    fields = {
        "batch": batch, "steps": steps, "inputs": xs[2], "state": state, "time_major": int(time_major),
        "act_bytes": 2 if wide else 1, "in_zp": p.in_zp, "hidden_zp": p.hidden_zp,
        **{k: list(p[k]) for k in ("x_mult", "x_shift", "h_mult", "h_shift")},
        **{k: p[k] for k in ("forget_mult", "forget_shift", "input_mult", "input_shift", "hidden_mult",
                             "hidden_shift", "hidden_min", "hidden_max", "tanh_mult", "tanh_shift", "cell_clip")},
    }  # fmt: skip
    args = [("ins",), ("outs",), ("scratch", "int16_t")]
    return Layer("rlx_lstm_s8", "rlx_lstm_params", fields, {}, args, scratch=5 * state * 2)


@RULES.rule("transpose_conv2d")
def _transpose_conv(graph: Graph, node: Node, params: Prepared) -> Layer:
    """int8 or int16 activations, int8 weights in TFLite's layout; the gather-form kernel needs no scratch."""
    x, w, b = (node.inputs + [None])[:3]
    xt = _t(graph, x)
    (_int16 if xt.dtype == DType.i16 else _int8)(graph, node, x, node.outputs[0])
    wt = _t(graph, w)
    _need(wt.dtype == DType.i8, node, f"takes int8 weights (got {wt.dtype})")
    _need(not np.any(wt.quant.zero_point), node, "needs symmetric weights (zero point 0)")
    wv = graph.params.get(w)
    _need(wv is not None and (b is None or b in graph.params), node, "needs constant weights and bias")
    o, kh, kw, _ = wv.shape
    bias = np.zeros(o, np.int64) if b is None else np.asarray(graph.params[b], np.int64).reshape(-1)
    rq, consts = _s16_requant(node, params)  # one requantization for both types: `wide` picks the form
    sh, sw = node.attrs["strides"]
    fields = {**_image_fields(graph, node), "out_c": o, "k_h": kh, "k_w": kw, "stride_h": sh, "stride_w": sw,
              "pad_top": params.tpads[0], "pad_left": params.tpads[1], "elem_bytes": xt.dtype.storage_bytes,
              **rq}  # fmt: skip
    consts.update(weights=transpose_conv_weight_layout(wv), bias=bias)
    return Layer("rlx_transpose_conv", "rlx_transpose_conv_params", fields, consts, [("in", 0), ("out", 0)])


def transpose_conv_weight_layout(w: np.ndarray) -> np.ndarray:
    """Weights [O, KH, KW, I] as the kernel reads them: [ceil(O / 4), KH, KW, I, 4], four output channels
    interleaved so that each input value meets its four weights in a row (zeros past O)."""
    o, kh, kw, i = w.shape
    padded = np.zeros((-(-o // 4) * 4, kh, kw, i), np.int8)
    padded[:o] = w
    return np.ascontiguousarray(padded.reshape(-1, 4, kh, kw, i).transpose(0, 2, 3, 4, 1)).reshape(-1)


@RULES.rule("log_softmax")
def _log_softmax(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The op's prepare tabulates each byte difference's Q5.26 value and exp; the kernel sums, takes the log."""
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x, y)
    shape = _shape(_t(graph, x))
    axis = node.attrs["axis"] % len(shape)
    p = params
    fields = {
        "outer": math.prod(shape[:axis]), "depth": shape[axis], "inner": math.prod(shape[axis + 1:]),
        "scaled_table": Const("scaled"), "exp_table": Const("exp"), "diff_min": p.diff_min,
        "reverse_mult": p.reverse_mult, "reverse_shift": p.reverse_shift,
    }  # fmt: skip
    consts = {"scaled": p.scaled_table, "exp": p.exp_table}
    return Layer("rlx_log_softmax_s8", "rlx_log_softmax_params", fields, consts, [("in", 0), ("out", 0)])


@RULES.rule("l2_normalize")
def _l2_normalize(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The kernel takes each slice's inverse norm itself (it depends on the data); prepare gives the zero point."""
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x, y)
    shape = _shape(_t(graph, x))
    axis = node.attrs["axis"] % len(shape)
    fields = {"outer": math.prod(shape[:axis]), "depth": shape[axis], "inner": math.prod(shape[axis + 1:]),
              "in_zp": params.in_zp}  # fmt: skip
    return Layer("rlx_l2_normalize_s8", "rlx_l2_normalize_params", fields, {}, [("in", 0), ("out", 0)])


@RULES.rule("layer_norm", "rms_norm")
def _norm(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Our integer layer / RMS norm (kernels/rlx_norm_s8.c), one rule for int8 and int16 activations:
    each row's 1/sqrt depends on the data, so the kernel takes it; prepare gives the rest."""
    x, gamma, y = node.inputs[0], node.inputs[1], node.outputs[0]
    beta = node.inputs[2] if len(node.inputs) > 2 else None
    wide = _t(graph, y).dtype == DType.i16
    (_int16 if wide else _int8)(graph, node, x, y)
    p = params
    depth = p.depth
    fields = {"rows": math.prod(_shape(_t(graph, x))) // max(depth, 1), "depth": depth,
              "centered": int(node.op == "layer_norm"), "gamma_bytes": _t(graph, gamma).dtype.numpy.itemsize,
              "beta_bytes": 0 if beta is None else _t(graph, beta).dtype.numpy.itemsize, "in_zp": p.in_zp,
              "gamma_zp": p.gamma_zp, "beta_zp": p.beta_zp, "out_zp": p.out_zp, "eps": p.eps, "g_mult": p.g_mult,
              "g_shift": p.g_shift, "b_mult": p.b_mult, "b_shift": p.b_shift, "act_min": p.act_min,
              "act_max": p.act_max}  # fmt: skip
    args = [("in", 0), ("in", 1), ("in", 2) if beta is not None else ("bytes", 0), ("out", 0)]
    kernel = "rlx_norm_s16" if wide else "rlx_norm_s8"
    return Layer(kernel, "rlx_norm_params", fields, {}, args)


# layout ------------------------------------------------------------------------------------
@RULES.rule("reshape", "squeeze", "unsqueeze")
def _view(graph: Graph, node: Node, params: Prepared) -> Layer:
    # the planner gives a view the offset of its input; emit() checks that and
    # falls back to a copy where it does not hold (quantization changed)
    nbytes = math.prod(_shape(_t(graph, node.outputs[0]))) * _t(graph, node.outputs[0]).dtype.storage_bytes
    return Layer("rlx_copy", None, {}, {}, [("in", 0), ("out", 0), ("bytes", nbytes)])


@RULES.rule("pad")
def _pad(graph: Graph, node: Node, params: Prepared) -> Layer:
    xt, yt = _t(graph, node.inputs[0]), _t(graph, node.outputs[0])
    xs, ys = _shape(xt), _shape(yt)
    _need(len(xs) <= 6, node, "pads tensors of rank <= 6")
    _need(xt.quant is None or not xt.quant.per_channel, node, "needs per-tensor quantization")
    rank = len(xs)
    pads = node.attrs["pads"]
    # a quantized fill is on the grid (the op's prepare); a plain one is the value itself
    fill = np.array([params.fill if "fill" in params else node.attrs["value"]]).astype(yt.dtype.numpy)
    lead = 6 - rank
    fields = {
        "elem_bytes": yt.dtype.storage_bytes,
        "in_shape": [1] * lead + list(xs),
        "out_shape": [1] * lead + list(ys),
        "before": [0] * lead + [pads[2 * i] for i in range(rank)],
        "fill": Const("fill"),
    }
    return Layer("rlx_pad", "rlx_pad_params", fields, {"fill": fill}, [("in", 0), ("out", 0)])


def _simplified_transpose(shape: list[int], perm: list[int], eb: int) -> tuple[list[int], list[int], int]:
    """(input shape, permutation, element bytes) of the same data movement with fewer axes.

    Size-1 axes go, input axes that stay neighbours in the output merge, and
    trailing axes that stay in place fold into the element.
    """
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    rank_of = {a: k for k, a in enumerate(kept)}  # position among the kept axes, in input order
    groups: list[list[int]] = []  # runs of kept input axes, in output order
    for a in (a for a in perm if shape[a] != 1):
        if groups and rank_of[groups[-1][-1]] + 1 == rank_of[a]:
            groups[-1].append(a)
        else:
            groups.append([a])
    while groups and kept and groups[-1][-1] == kept[-1]:  # the last input axes, in place: one element
        eb *= math.prod(shape[a] for a in groups.pop())
        kept = [a for a in kept if all(a not in g for g in groups)]
    order = sorted(range(len(groups)), key=lambda k: groups[k][0])  # the groups in input order
    in_shape = [math.prod(shape[a] for a in groups[k]) for k in order]
    new_perm = [order.index(k) for k in range(len(groups))]
    return in_shape, new_perm, eb


@RULES.rule("transpose")
def _transpose(graph: Graph, node: Node, params: Prepared) -> Layer:
    xt = _t(graph, node.inputs[0])
    shape, perm, eb = _simplified_transpose(_shape(xt), list(node.attrs["perm"]), xt.dtype.storage_bytes)
    _need(len(shape) <= 6, node, "moves at most 6 axes that are not merged (after dropping size-1 axes)")
    strides = [math.prod(shape[a + 1 :]) for a in range(len(shape))]
    lead = 6 - len(shape)
    fields = {
        "elem_bytes": eb,
        "out_shape": [1] * lead + [shape[a] for a in perm],
        "in_stride": [0] * lead + [strides[a] for a in perm],
    }
    return Layer("rlx_transpose", "rlx_transpose_params", fields, {}, [("in", 0), ("out", 0)])


@RULES.rule(
    "slice",
    "split",
    "unstack",
    "mirror_pad",
    "space_to_depth",
    "depth_to_space",
    "space_to_batch_nd",
    "batch_to_space_nd",
    "broadcast_to",
    "gather",
    "gather_nd",
    "resize_nearest_neighbor",
)
def _gather(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Pure data movement: walks the op's own reference gives at compile time (``_gather``), or
    for gather and gather_nd fed computed indices, the kernel's take modes."""
    xt = _t(graph, node.inputs[0])
    for v in (node.inputs[0], *node.outputs):
        t = _t(graph, v)
        _need(t.dtype in ACTIVATION_DTYPES and t.quant is not None, node, f"needs quantized int8 tensors ({v})")
    eb = xt.dtype.storage_bytes
    fields: dict[str, Any] = {"n_outputs": len(node.outputs), "walks": None, "rows": None, "fill": None}
    consts: dict[str, np.ndarray] = {}
    args = [("ins",), ("outs",)]
    if any(v not in graph.params for v in node.inputs[1:]):
        fields.update(_take_fields(graph, node, eb, consts))
        return Layer("rlx_gather", "rlx_gather_params", fields, consts, args)
    maps = source_maps(node.op, _shape(xt), node.attrs, [graph.params[v] for v in node.inputs[1:]])
    walks, rows = kernel_tables([walk(m, eb) for m in maps])
    widest = max(int(w) for w in walks[0::WALK_INTS]) if len(walks) else eb
    fill = np.array([params.fill if "fill" in params else 0], xt.dtype.numpy).view(np.uint8)
    fields.update(walks=Const("walks"), rows=Const("rows") if rows.size else None, fill=Const("fill"))
    consts.update(walks=walks, fill=np.tile(fill, widest // eb))
    if rows.size:
        consts["rows"] = rows
    return Layer("rlx_gather", "rlx_gather_params", fields, consts, args)


def _take_fields(graph: Graph, node: Node, eb: int, consts: dict) -> dict:
    """The take modes of rlx_gather: gather and gather_nd with indices computed at run time."""
    xs, it = _shape(_t(graph, node.inputs[0])), _t(graph, node.inputs[1])
    idx = _shape(it)
    fields = {"index_bytes": it.dtype.storage_bytes, "n_idx": math.prod(idx)}
    if node.op == "gather":
        a = node.attrs["axis"] % len(xs)
        bd = node.attrs["batch_dims"]
        bd = bd + len(idx) if bd < 0 else bd
        batches = math.prod(xs[:bd])
        fields.update(indexed=1, batches=batches, outer=math.prod(xs[bd:a]), axis_size=xs[a])
        fields.update(n_idx=math.prod(idx[bd:]), row_bytes=math.prod(xs[a + 1 :]) * eb)
        return fields
    k = idx[-1]
    consts["nd_dims"] = np.array(xs[:k], np.int32)
    consts["nd_strides"] = np.array([math.prod(xs[j + 1 : k]) for j in range(k)], np.int32)
    fields.update(indexed=2, nd=k, n_idx=math.prod(idx[:-1]), row_bytes=math.prod(xs[k:]) * eb)
    fields.update(nd_dims=Const("nd_dims"), nd_strides=Const("nd_strides"))
    return fields


@RULES.rule("stack")
def _stack(graph: Graph, node: Node, params: Prepared) -> Layer:
    # stack is concat along a new axis: the same bytes in the same order, the same prepared tables
    for v in (*node.inputs, node.outputs[0]):
        _need(_t(graph, v).dtype in ACTIVATION_DTYPES, node, f"needs quantized int8 tensors ({v})")
    return _concat(graph, node, params)


@RULES.rule("concat")
def _concat(graph: Graph, node: Node, params: Prepared) -> Layer:
    yt = _t(graph, node.outputs[0])
    ys = _shape(yt)
    axis = node.attrs["axis"] % len(ys)
    eb = yt.dtype.storage_bytes
    chunks, mapped, tables = [], [], []
    ident = np.arange(256, dtype=np.uint8)
    _need("tables" in params or not any(params.get("rescale", ())), node, "requantizes byte tensors only")
    for k, v in enumerate(node.inputs):
        chunks.append(math.prod(_shape(_t(graph, v))[axis:]) * eb)
        # the op's prepare maps every byte of a requantized input; others are copied
        table = params.tables[k].view(np.uint8) if "tables" in params else ident
        mapped.append(0 if np.array_equal(table, ident) else 1)
        tables.append(table)
    fields = {
        "n_inputs": len(node.inputs),
        "outer": math.prod(ys[:axis]),
        "chunk": Const("chunk"),
        "mapped": Const("mapped"),
        "tables": Const("tables"),
    }
    consts = {
        "chunk": np.array(chunks, np.int32),
        "mapped": np.array(mapped, np.int32),
        "tables": np.concatenate(tables).astype(np.uint8),
    }
    return Layer("rlx_concat", "rlx_concat_params", fields, consts, [("ins",), ("out", 0)])


@RULES.rule("mean", "sum")  # TFLite Micro's QuantizedMeanOrSum: sum prepares no 1/count
def _mean(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x, y)
    xs = _shape(_t(graph, x))
    _need(len(xs) <= 4, node, "reduces tensors of rank <= 4")
    axes = sorted({a % len(xs) for a in node.attrs["axes"]})
    p = params
    lead = 4 - len(xs)
    fields = {
        "shape": [1] * lead + list(xs),
        "reduce": [0] * lead + [1 if d in axes else 0 for d in range(len(xs))],
        "sum_offset": p.sum_offset,
        "mult": p.mult,
        "shift": p.shift,
        "out_zp": p.out_zp,
        "out_min": p.out_min,
        "out_max": p.out_max,
    }
    return Layer("rlx_mean_s8", "rlx_mean_params", fields, {}, [("in", 0), ("out", 0)])


_REDUCE_CODES = {"reduce_max": 0, "reduce_min": 1, "argmax": 2, "argmin": 3}


@RULES.rule(*_REDUCE_CODES)
def _reduce(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Ops that pick an element: the stored value (its parameters are the output's) or its int32 index."""
    x, y = node.inputs[0], node.outputs[0]
    _int8(graph, node, x)
    xs = _shape(_t(graph, x))
    if node.op.startswith("arg"):
        _need(_t(graph, y).dtype == DType.i32, node, "writes int32 indices (TFLite Micro's ARG_MAX / ARG_MIN)")
        axes = {node.attrs["axis"] % len(xs)}
    else:
        _int8(graph, node, y)
        axes = {a % len(xs) for a in node.attrs["axes"]}
    fields = {**_reduce_walk(node, xs, axes), "op": _REDUCE_CODES[node.op]}
    return Layer("rlx_reduce_s8", "rlx_reduce_params", fields, {}, [("in", 0), ("out", 0)])


def _reduce_walk(node: Node, xs: tuple[int, ...], axes: set[int]) -> dict:
    """The reduce kernels' 4-d walk (``shape``, ``reduce``) of an input of shape ``xs`` reduced over ``axes``."""
    # adjacent dimensions both reduced or both kept walk as one: any rank whose reduced and
    # kept runs alternate at most 4 times fits the kernel's 4 dimensions
    shape: list[int] = []
    reduce: list[int] = []
    for d, n in enumerate(xs):
        r = int(d in axes)
        if n == 1 and not r:
            continue  # a kept 1 adds nothing to either side
        if reduce and reduce[-1] == r:
            shape[-1] *= n
        else:
            shape.append(n)
            reduce.append(r)
    _need(len(shape) <= 4, node, f"reduces runs of at most 4 alternately reduced and kept dimensions, got {xs}")
    lead = 4 - len(shape)
    return {"shape": [1] * lead + shape, "reduce": [0] * lead + reduce}


# the kernel's element type codes (RLX_RQ_* in kernels/rlx_requantize_int.h)
_RQ_TYPES = {DType.i8: 0, DType.u8: 1, DType.i16: 2, DType.i32: 3}


@RULES.rule("requantize")
def _requantize(graph: Graph, node: Node, params: Prepared) -> Layer:
    """Byte inputs quantized per tensor look up the op's table; int16 and int32 inputs and per-channel
    parameters run the multiplier and shift of the same prepare (kernels/rlx_requantize_int.c)."""
    if params.get("table") is not None:
        return _lut(graph, node, params)
    xt, yt = _t(graph, node.inputs[0]), _t(graph, node.outputs[0])
    _need(xt.dtype in _RQ_TYPES, node, f"requantizes int8, uint8, int16 or int32 inputs, got {xt.dtype}")
    _need(yt.dtype in _RQ_TYPES, node, f"requantizes to int8, uint8, int16 or int32, got {yt.dtype}")
    shape = _shape(xt)
    arrays = {k: np.asarray(params[k], np.int64) for k in ("in_zp", "mult", "shift", "out_zp")}
    # prepare shapes per-channel arrays to broadcast against x: the one axis longer than 1 is the channel's
    axes = {a for arr in arrays.values() if arr.ndim for a, n in enumerate(arr.shape) if n > 1}
    _need(len(axes) <= 1, node, "needs one quantized channel axis")
    axis = axes.pop() if axes else len(shape)
    channels = shape[axis] if axis < len(shape) else 1
    consts = {k: np.broadcast_to(arr.reshape(-1), (channels,)).astype(np.int32) for k, arr in arrays.items()}
    fields = {"outer": math.prod(shape[:axis]), "channels": channels, "inner": math.prod(shape[axis + 1:]),
              "in_type": _RQ_TYPES[xt.dtype], "out_type": _RQ_TYPES[yt.dtype], **{k: Const(k) for k in consts},
              "act_min": int(params.act_min), "act_max": int(params.act_max)}  # fmt: skip
    return Layer("rlx_requantize_int", "rlx_requantize_params", fields, consts, [("in", 0), ("out", 0)])


@RULES.rule("quantize")
def _quantize(graph: Graph, node: Node, params: Prepared) -> Layer:
    xt, yt = _t(graph, node.inputs[0]), _t(graph, node.outputs[0])
    _need(xt.dtype.numpy == np.float32, node, "quantizes float32 inputs only")
    _need(yt.dtype == DType.i8 and isinstance(params.scale, float), node, "quantizes to per-tensor int8")
    fields = {
        "size": math.prod(_shape(yt)),
        "scale": np.float32(params.scale),
        "zp": params.zp,
        "out_min": params.qmin,
        "out_max": params.qmax,
    }
    return Layer("rlx_quantize_f32_s8", "rlx_quantize_params", fields, {}, [("in", 0), ("out", 0)])


# int4 weights --------------------------------------------------------------------------------
# Layers whose weights are int4 run kernels of their own (kernels/rlx_convolve_s4.c,
# rlx_depthwise_conv_s4.c) that read the weights packed two per byte, as flash holds them:
# ceil(n / 2) bytes for n weights, no padding. The numerics are the int8 layers': the same
# prepared parameters, folded bias and requantization.

# The DSP GEMM accumulates 16 x the dot product of whole chunks of 8 (nibbles unpacked in
# place, see rlx_convolve_s4.c); it is exact while 16 * 128 * sum |w| stays below 2**31.
_S4_ACC_LIMIT = 2**31


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """int4 values, in the order a kernel reads them, two per byte: element 2i in the low nibble
    of byte i, 2i + 1 in its high nibble (an odd count's last high nibble 0)."""
    flat = np.asarray(values, np.int64).reshape(-1)
    if flat.size and (flat.min() < -8 or flat.max() > 7):
        raise ValueError(f"int4 weights must be in [-8, 7], got [{flat.min()}, {flat.max()}]")
    nib = np.zeros(flat.size + flat.size % 2, np.uint8)
    nib[: flat.size] = flat & 0x0F
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)


def gemm_s4_order(w2: np.ndarray) -> np.ndarray:
    """Weights [O, K] in the order rlx_gemm_s4_params reads them (rlx_nn.h): per block of 4 rows
    (the last block the rows left), each whole chunk of 8 reduction elements as one word per
    row whose byte i holds elements i and 4 + i, then the K % 8 remaining elements row by row."""
    o, k = w2.shape
    k8 = k // 8
    parts = []
    for ob in range(0, o, 4):
        rows = w2[ob : ob + 4]
        chunks = rows[:, : 8 * k8].reshape(len(rows), k8, 2, 4).transpose(1, 0, 3, 2)  # [chunk][row][i][half]
        parts += [chunks.reshape(-1), rows[:, 8 * k8 :].reshape(-1)]
    return np.concatenate(parts) if parts else np.zeros(0, w2.dtype)


def depthwise_s4_order(w_taps: np.ndarray) -> np.ndarray:
    """Depthwise weights [taps, C] in the order rlx_dw_conv_s4_params reads them: per pair of
    channels, tap after tap, the pair's two weights; an odd last channel's taps after them."""
    taps, c = w_taps.shape
    pairs = w_taps[:, : c - c % 2].reshape(taps, c // 2, 2).transpose(1, 0, 2).reshape(-1)
    return np.concatenate([pairs, w_taps[:, c - 1]]) if c % 2 else pairs


def _s4_requant(params: Prepared, fields: dict, consts: dict, bound, acc_lo, acc_hi) -> None:
    """The requantization fields and constants of an int4 layer, as the int8 kernels take them:
    mode 0 reads mult and shift, the fast modes mult and rq_add (the right shift is in it)."""
    mode, mult, add, rshift = _requant(
        params.mult, params.shift, bound, acc_lo, acc_hi, params.out_zp, params.act_min, params.act_max
    )
    fields.update(rq_mode=mode, mult=Const("mult"), shift=None, rq_add=None)
    consts["mult"] = np.asarray(mult).astype(np.int32)
    if mode == 0:
        fields["shift"] = Const("shift")
        consts["shift"] = np.asarray(rshift).astype(np.int32)
    else:
        fields["rq_add"] = Const("rq_add")
        consts["rq_add"] = np.asarray(add).astype(np.int32)


def _gemm_s4(graph: Graph, node: Node, params: Prepared, w2: np.ndarray, b: np.ndarray | None) -> tuple[dict, dict]:
    """Fields and constants of an int4 GEMM (rlx_gemm_s4_params): packed weights [O, K], folded bias."""
    wt = _t(graph, node.inputs[1])
    _need(not np.any(wt.quant.zero_point), node, "needs symmetric weights (zero point 0)")
    o, k = w2.shape
    w64 = w2.astype(np.int64)
    whole = np.abs(w64[:, : 8 * (k // 8)]).sum(axis=1)
    _need(
        int(16 * 128 * whole.max(initial=0)) < _S4_ACC_LIMIT,
        node,
        f"takes int4 layers with 16 * 128 * sum |w| < 2**31 per row (reduction of {k})",
    )
    folded = fp.wrap_int32(folded_bias(params, w64.sum(axis=1), b)).astype(np.int32)
    # as the int8 GEMM: |acc| for any int8 input, and each channel's accumulator range
    bound = np.abs(folded.astype(np.int64)) + 128 * np.abs(w64).sum(axis=1)
    acc_lo = folded.astype(np.int64) + np.minimum(-128 * w64, 127 * w64).sum(axis=1)
    acc_hi = folded.astype(np.int64) + np.maximum(-128 * w64, 127 * w64).sum(axis=1)
    fields = {"out_c": o, "k": k, "out_zp": params.out_zp, "act_min": params.act_min, "act_max": params.act_max}
    fields.update(weights=Const("weights"), bias=Const("bias"))
    consts = {"weights": pack_nibbles(gemm_s4_order(w2)), "bias": folded}
    _s4_requant(params, fields, consts, bound, acc_lo, acc_hi)
    return fields, consts


def _conv_s4(graph: Graph, node: Node, params: Prepared, wv: np.ndarray, bv: np.ndarray | None) -> Layer:
    """An int4 convolution with weights ``wv`` [O, KH, KW, C]: 1x1 without padding reads its input
    in place, others gather each pixel's receptive field into int8 scratch."""
    o, kh, kw, c = wv.shape
    gemm, consts = _gemm_s4(graph, node, params, wv.reshape(o, -1), bv)
    fields = {"gemm": gemm, **_image_fields(graph, node), **_window_fields(node, kh, kw, params.pads)}
    fields["in_zp"] = params.in_zp
    if kh == 1 and kw == 1 and not any(params.pads):
        return Layer("rlx_convolve_1x1_s4", "rlx_conv_s4_params", fields, consts, [("in", 0), ("out", 0)])
    args = [("in", 0), ("out", 0), ("scratch", "int8_t")]
    return Layer("rlx_convolve_s4", "rlx_conv_s4_params", fields, consts, args, -(-kh * kw * c // 4) * 4)


def _conv2d_s4(graph: Graph, node: Node, params: Prepared) -> Layer:
    _, wv, bv = _weighted(graph, node)
    return _conv_s4(graph, node, params, _dense_groups(wv, node.attrs["groups"]), bv)


def _fc_s4(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, wv, bv = _weighted(graph, node)
    gemm, consts = _gemm_s4(graph, node, params, wv, bv)
    xs = _shape(_t(graph, x))
    fields = {"gemm": gemm, "batches": math.prod(xs[:-1]), "in_features": xs[-1]}
    return Layer("rlx_fully_connected_s4", "rlx_fc_s4_params", fields, consts, [("in", 0), ("out", 0)])


def _depthwise_s4(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, wv, bv = _weighted(graph, node)
    _need(not np.any(_t(graph, node.inputs[1]).quant.zero_point), node, "needs symmetric weights (zero point 0)")
    _, kh, kw, cm = wv.shape
    m = node.attrs["depth_multiplier"]
    if _shape(_t(graph, x))[3] == 1 and m > 1:  # one input channel to M outputs: a dense convolution
        return _conv_s4(graph, node, params, np.ascontiguousarray(wv.transpose(3, 1, 2, 0)), bv)
    zp_x = params.in_zp
    bias = np.zeros(cm, np.int32) if bv is None else bv.astype(np.int32)
    w_taps = wv.reshape(kh * kw, cm).astype(np.int64)
    # as the int8 kernel: |acc| <= |bias| + 255 sum |w|; (x + in_offset) spans [-128 - zp_x, 127 - zp_x]
    bound = np.abs(bias.astype(np.int64)) + 255 * np.abs(w_taps).sum(axis=0)
    ends = np.stack([w_taps * (-128 - zp_x), w_taps * (127 - zp_x)])
    acc_lo = bias.astype(np.int64) + ends.min(axis=0).sum(axis=0)
    acc_hi = bias.astype(np.int64) + ends.max(axis=0).sum(axis=0)
    fields = {**_image_fields(graph, node), "out_c": cm, "ch_mult": m, **_window_fields(node, kh, kw, params.pads)}
    fields.update(in_offset=-zp_x, out_zp=params.out_zp, act_min=params.act_min, act_max=params.act_max)
    fields.update(weights=Const("weights"), bias=Const("bias"))
    consts = {"weights": pack_nibbles(depthwise_s4_order(w_taps)), "bias": bias}
    _s4_requant(params, fields, consts, bound, acc_lo, acc_hi)
    return Layer("rlx_depthwise_conv_s4", "rlx_dw_conv_s4_params", fields, consts, [("in", 0), ("out", 0)])


_S4_RULES = {"conv2d": _conv2d_s4, "depthwise_conv2d": _depthwise_s4, "fully_connected": _fc_s4}


# int16 activations -----------------------------------------------------------------------------
# TFLite's 16x8 scheme: int16 activations, int8 weights, int64 bias. Layers whose activations
# are int16 run the kernels of kernels/rlx_convolve_s16.c, rlx_depthwise_conv_s16.c and
# rlx_elementwise_s16.c (and, each with its own header, rlx_unary_s16.c: abs, quantize, dequantize;
# rlx_reduce_s16.c: mean, sum; rlx_binary_s16.c: squared_difference, maximum, minimum;
# rlx_select_s16.c) on the same prepared parameters as the reference; pure data movement
# (views, pad, concat, transpose, gather-like ops) moves 2-byte elements with the int8 rules.
_S16_MOVEMENT = frozenset(
    {"reshape", "squeeze", "unsqueeze", "pad", "concat", "stack", "transpose", "slice", "split", "unstack",
     "mirror_pad", "space_to_depth", "depth_to_space", "space_to_batch_nd", "batch_to_space_nd", "broadcast_to",
     "gather", "gather_nd", "resize_nearest_neighbor"}
)  # fmt: skip


def _int16(graph: Graph, node: Node, *values: str) -> None:
    for v in values:
        t = _t(graph, v)
        _need(t.dtype == DType.i16 and t.quant is not None, node, f"needs quantized int16 tensors ({v} is {t.dtype})")
        _need(not t.quant.per_channel, node, f"needs per-tensor quantization of activation {v}")


def _weighted_s16(graph: Graph, node: Node) -> tuple[str, np.ndarray, np.ndarray]:
    """A 16x8 layer's input, its int8 weights and its bias as int64 (zeros without one)."""
    x, w, b = (node.inputs + [None])[:3]
    _int16(graph, node, x, node.outputs[0])
    wt = _t(graph, w)
    _need(wt.dtype == DType.i8, node, f"takes int8 weights with int16 activations (got {wt.dtype})")
    _need(not np.any(wt.quant.zero_point), node, "needs symmetric weights (zero point 0)")
    wv = graph.params.get(w)
    _need(wv is not None and (b is None or b in graph.params), node, "needs constant weights and bias")
    channels = wv.shape[3] if node.op == "depthwise_conv2d" else wv.shape[0]
    bias = np.zeros(channels, np.int64) if b is None else np.asarray(graph.params[b], np.int64).reshape(-1)
    return x, wv, bias


def _s16_requant(node: Node, params: Prepared) -> tuple[dict, dict]:
    """The requantization fields and per-channel constants every 16x8 MAC layer shares."""
    shift = np.asarray(params.shift, np.int64).reshape(-1)
    # the int64 form shifts right by 15 - shift: at least 1 (TFLite's kernel assumes it)
    _need(not params.wide or bool(np.all(shift <= 14)), node, "needs requantization shifts <= 14 (16x8 int64 form)")
    fields = {"in_offset": -params.in_zp, "out_zp": params.out_zp, "act_min": params.act_min,
              "act_max": params.act_max, "wide": int(bool(params.wide)), "weights": Const("weights"),
              "bias": Const("bias"), "mult": Const("mult"), "shift": Const("shift")}  # fmt: skip
    consts = {"mult": np.asarray(params.mult, np.int32).reshape(-1), "shift": shift.astype(np.int32)}
    return fields, consts


def _conv_s16_layer(graph: Graph, node: Node, params: Prepared, wv: np.ndarray, bias: np.ndarray) -> Layer:
    o, kh, kw, _ = wv.shape
    rq, consts = _s16_requant(node, params)
    fields = {**_image_fields(graph, node), "out_c": o, **_window_fields(node, kh, kw, params.pads), **rq}
    consts.update(weights=np.ascontiguousarray(wv, np.int8).reshape(-1), bias=bias)
    return Layer("rlx_convolve_s16", "rlx_conv_s16_params", fields, consts, [("in", 0), ("out", 0)])


def _conv2d_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    _, wv, bias = _weighted_s16(graph, node)
    if node.attrs["groups"] > 1:
        rq, consts = _s16_requant(node, params)
        rq = {k: v for k, v in rq.items() if not isinstance(v, Const)}
        return _conv_grouped(graph, node, params, wv, bias, rq, consts["mult"], consts["shift"])
    return _conv_s16_layer(graph, node, params, wv, bias)


def _depthwise_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    _, wv, bias = _weighted_s16(graph, node)
    _, kh, kw, cm = wv.shape
    rq, consts = _s16_requant(node, params)
    fields = {**_image_fields(graph, node), "out_c": cm, "ch_mult": node.attrs["depth_multiplier"],
              **_window_fields(node, kh, kw, params.pads), **rq}  # fmt: skip
    consts.update(weights=np.ascontiguousarray(wv, np.int8).reshape(-1), bias=bias)
    return Layer("rlx_depthwise_conv_s16", "rlx_dw_conv_s16_params", fields, consts, [("in", 0), ("out", 0)])


def _fc_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, wv, bias = _weighted_s16(graph, node)
    _need(params.w_zp == 0, node, "needs symmetric weights (zero point 0)")
    xs = _shape(_t(graph, x))
    rq, consts = _s16_requant(node, params)
    fields = {"batches": math.prod(xs[:-1]), "in_features": xs[-1], "out_c": wv.shape[0], **rq}
    consts.update(weights=np.ascontiguousarray(wv, np.int8).reshape(-1), bias=bias)
    return Layer("rlx_fully_connected_s16", "rlx_fc_s16_params", fields, consts, [("in", 0), ("out", 0)])


def _pool_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    _int16(graph, node, node.inputs[0], node.outputs[0])
    p = params
    n, h, w, c = _shape(_t(graph, node.inputs[0]))
    _, oh, ow, _ = _shape(_t(graph, node.outputs[0]))
    fields = {"batches": n, "in_h": h, "in_w": w, "ch": c, "out_h": oh, "out_w": ow, "k_h": p.kernel[0],
              "k_w": p.kernel[1], "stride_h": p.strides[0], "stride_w": p.strides[1], "pad_top": p.pads[0],
              "pad_left": p.pads[2], "act_min": p.act_min, "act_max": p.act_max}  # fmt: skip
    kernel = "rlx_maxpool_s16" if node.op == "max_pool2d" else "rlx_avgpool_s16"
    return Layer(kernel, "rlx_pool_params", fields, {}, [("in", 0), ("out", 0)])


def _add_mul_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """add / sub rescale both inputs onto a common scale (multipliers below one); mul requantizes the product."""
    _int16(graph, node, *node.inputs, node.outputs[0])
    p = params
    fields = {**_broadcast_fields(graph, node), "a_offset": -p.a_zp, "b_offset": -p.b_zp}
    if node.op == "mul":
        fields.update(left_shift=0, a_mult=0, a_shift=0, b_mult=0, b_shift=0, subtract=0)
    else:
        _need(p.a_shift <= 0 and p.b_shift <= 0 and p.out_shift <= 0, node, "needs input multipliers below one")
        fields.update(left_shift=p.left_shift, a_mult=p.a_mult, a_shift=p.a_shift, b_mult=p.b_mult,
                      b_shift=p.b_shift, subtract=int(node.op == "sub"))  # fmt: skip
    fields.update(out_mult=p.out_mult, out_shift=p.out_shift, out_zp=p.out_zp, act_min=p.act_min, act_max=p.act_max)
    kernel = "rlx_mul_s16" if node.op == "mul" else "rlx_add_s16"
    return Layer(kernel, "rlx_add_s16_params", fields, {}, [("in", 0), ("in", 1), ("out", 0)])


def _rescale_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """relu, relu6, clamp (one multiplier) and leaky_relu (one per sign of the offset input)."""
    _int16(graph, node, node.inputs[0], node.outputs[0])
    p = params
    if node.op == "leaky_relu":
        rescale = dict(identity=0, pos_mult=p.id_mult, pos_shift=p.id_shift, neg_mult=p.alpha_mult,
                       neg_shift=p.alpha_shift)  # fmt: skip
    else:
        rescale = dict(identity=int(bool(p.identity)), pos_mult=p.mult, pos_shift=p.shift, neg_mult=p.mult,
                       neg_shift=p.shift)  # fmt: skip
    fields = {"size": math.prod(_shape(_t(graph, node.outputs[0]))), "in_zp": p.in_zp, "out_zp": p.out_zp,
              **rescale, "act_min": p.act_min, "act_max": p.act_max}  # fmt: skip
    return Layer("rlx_rescale_s16", "rlx_rescale_s16_params", fields, {}, [("in", 0), ("out", 0)])


def _softmax_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    x, y = node.inputs[0], node.outputs[0]
    if _t(graph, x).dtype == DType.i8:  # int8 in, int16 out: the int8 kernel's gemmlowp softmax, 16 output bits
        return _softmax(graph, node, params)
    _int16(graph, node, x, y)
    shape = _shape(_t(graph, x))
    _need(node.attrs["axis"] % len(shape) == len(shape) - 1, node, "normalizes the innermost axis only")
    depth = shape[-1]
    # the sum of up to depth exps of at most 32767 stays below 2**31 (the kernel's leading-zero count)
    _need(depth * 32767 < 2**31, node, f"normalizes rows of fewer than 65538 elements, got {depth}")
    walk, mask_arg = _softmax_mask(graph, node, shape)
    fields = {"rows": math.prod(shape) // max(depth, 1), "depth": depth, "mult": params.mult,
              "shift": params.shift, "exp_lut": Const("exp_lut"), "recip_lut": Const("recip_lut"),
              "mask": walk}  # fmt: skip
    consts = {"exp_lut": np.asarray(params.exp_lut, np.int16), "recip_lut": np.asarray(params.recip_lut, np.int16)}
    return Layer("rlx_softmax_s16", "rlx_softmax_s16_params", fields, consts, [("in", 0), mask_arg, ("out", 0)])


# kernels/rlx_unary_s16.c: its op codes
_UNARY_S16 = {"abs": 0, "quantize": 1, "dequantize": 2}


def _unary_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """abs (int16 both sides), quantize (float32 -> int16) and dequantize (int16 -> float32), per tensor."""
    x, y = node.inputs[0], node.outputs[0]
    p = params
    fields: dict[str, Any] = {"size": math.prod(_shape(_t(graph, y))), "op": _UNARY_S16[node.op]}
    if node.op == "abs":
        _int16(graph, node, x, y)
        fields.update(in_zp=p.in_zp, out_zp=p.out_zp, rescale=int(bool(p.rescale)), mult=p.mult, shift=p.shift,
                      out_min=p.act_min, out_max=p.act_max)  # fmt: skip
    elif node.op == "quantize":
        _need(_t(graph, x).dtype == DType.f32, node, f"quantizes float32 inputs only, got {_t(graph, x).dtype}")
        _need(isinstance(p.scale, float), node, "quantizes to int16 per tensor only")
        fields.update(scale=np.float32(p.scale), out_zp=p.zp, out_min=p.qmin, out_max=p.qmax)
    else:
        _need(_t(graph, y).dtype == DType.f32, node, f"dequantizes to float32 only, got {_t(graph, y).dtype}")
        _need(isinstance(p.scale, float) and p.narrow, node, "dequantizes int16 per tensor only")
        fields.update(scale=np.float32(p.scale), in_zp=p.zp)
    return Layer("rlx_unary_s16", "rlx_unary_s16_params", fields, {}, [("in", 0), ("out", 0)])


def _reduce_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """mean and sum requantize the offset sum (TFLite Micro's QuantizedMeanOrSum, kernels/rlx_reduce_s16.c)."""
    x, y = node.inputs[0], node.outputs[0]
    _int16(graph, node, x, y)
    xs = _shape(_t(graph, x))
    _need(math.prod(xs) > 0, node, "reduces non-empty inputs only")
    p = params
    fields = {**_reduce_walk(node, xs, {a % len(xs) for a in node.attrs["axes"]}), "sum_offset": p.sum_offset,
              "mult": p.mult, "shift": p.shift, "out_zp": p.out_zp, "out_min": p.out_min,
              "out_max": p.out_max}  # fmt: skip
    return Layer("rlx_reduce_s16", "rlx_mean_params", fields, {}, [("in", 0), ("out", 0)])


# kernels/rlx_binary_s16.c: its op codes
_BINARY_S16 = {"squared_difference": 0, "maximum": 1, "minimum": 2}


def _binary_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """squared_difference: both inputs onto the common scale, the difference squared, one requantization;
    maximum / minimum: the operands compared in the output's parameters (each copied or requantized)."""
    _int16(graph, node, *node.inputs, node.outputs[0])
    p = params
    fields = {**_broadcast_fields(graph, node), "op": _BINARY_S16[node.op], "a_offset": -p.a_zp,
              "b_offset": -p.b_zp, "a_mult": p.a_mult, "a_shift": p.a_shift, "b_mult": p.b_mult,
              "b_shift": p.b_shift, "out_zp": p.out_zp, "act_min": p.act_min, "act_max": p.act_max}  # fmt: skip
    if node.op == "squared_difference":
        fields.update(left_shift=p.left_shift, out_mult=p.out_mult, out_shift=p.out_shift)
    else:
        fields.update(a_rescale=int(bool(p.a_rescale)), b_rescale=int(bool(p.b_rescale)))
    return Layer("rlx_binary_s16", "rlx_binary_s16_params", fields, {}, [("in", 0), ("in", 1), ("out", 0)])


def _select_v2_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """The condition picks x or y, each copied or requantized onto the output's parameters."""
    _int16(graph, node, *node.inputs[1:], node.outputs[0])
    p = params
    fields = _select_fields(graph, node)
    for key in "xy":
        fields.update({f"{key}_rescale": int(bool(p[f"{key}_rescale"])),
                       **{f"{key}_{k}": p[f"{key}_{k}"] for k in ("zp", "mult", "shift")}})  # fmt: skip
    fields.update(out_zp=p.out_zp, act_min=p.act_min, act_max=p.act_max)
    args = [("in", 0), ("in", 1), ("in", 2), ("out", 0)]
    return Layer("rlx_select_s16", "rlx_select_s16_params", fields, {}, args)


def _lut_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """gelu and silu: TFLite's 513-entry int16 table, interpolated (kernels/rlx_lut_s16.c); the op's
    prepare built it."""
    _int16(graph, node, node.inputs[0], node.outputs[0])
    _need(params.get("lut") is not None, node, "needs its prepared int16 table")
    fields = {"size": math.prod(_shape(_t(graph, node.outputs[0]))), "lut": Const("lut")}
    consts = {"lut": np.asarray(params.lut, np.int16)}
    return Layer("rlx_lut_s16", "rlx_lut_s16_params", fields, consts, [("in", 0), ("out", 0)])


def _activation_s16(graph: Graph, node: Node, params: Prepared) -> Layer:
    """TFLite's int16 logistic and tanh (kernels/rlx_activation_s16.c): the prepared multiplier and shift
    onto the sigmoid table's grid."""
    _int16(graph, node, node.inputs[0], node.outputs[0])
    fields = {"size": math.prod(_shape(_t(graph, node.outputs[0]))), "op": int(node.op == "tanh"),
              "input_multiplier": params.mult, "input_left_shift": params.shift}  # fmt: skip
    return Layer("rlx_activation_s16", "rlx_activation_s16_params", fields, {}, [("in", 0), ("out", 0)])


_S16_RULES: dict[str, Callable[[Graph, Node, Prepared], Layer]] = {
    "conv2d": _conv2d_s16,
    "depthwise_conv2d": _depthwise_s16,
    "fully_connected": _fc_s16,
    "avg_pool2d": _pool_s16,
    "max_pool2d": _pool_s16,
    "global_avg_pool": _pool_s16,
    "add": _add_mul_s16,
    "sub": _add_mul_s16,
    "mul": _add_mul_s16,
    "relu": _rescale_s16,
    "relu6": _rescale_s16,
    "clamp": _rescale_s16,
    "leaky_relu": _rescale_s16,
    "softmax": _softmax_s16,
    "abs": _unary_s16,
    "quantize": _unary_s16,
    "dequantize": _unary_s16,
    "mean": _reduce_s16,
    "sum": _reduce_s16,
    "squared_difference": _binary_s16,
    "maximum": _binary_s16,
    "minimum": _binary_s16,
    "select_v2": _select_v2_s16,
    "sigmoid": _activation_s16,
    "gelu": _lut_s16,
    "silu": _lut_s16,
    "tanh": _activation_s16,
    "requantize": _requantize,  # one rule for every storage type
    "svdf": _svdf,  # int8 activations; an int16 state is the one rule's case too
    "lstm": _lstm,  # one rule for int8 and int16x8
    "transpose_conv2d": _transpose_conv,  # one rule for int8 and int16
    "matmul": _matmul,  # one rule for int8 and int16
    "layer_norm": _norm,  # one rule for int8 and int16
    "rms_norm": _norm,
}
# The ops this target runs on int16 activations: the 16x8 rules and data movement (the op x target
# test draws each of them through int16x8 PTQ).
INT16_OPS = frozenset(_S16_RULES) | _S16_MOVEMENT


def _int16_activations(graph: Graph, node: Node) -> bool:
    return any(v is not None and _t(graph, v).dtype == DType.i16 for v in (*node.inputs[:1], *node.outputs))


def _rule_for(graph: Graph, node: Node) -> Callable[[Graph, Node, Prepared], Layer]:
    """The rule of ``node``: its op's, the int16 one where its activations are int16, or the int4
    one where its weights (input 1) are int4."""
    if _int16_activations(graph, node) and node.op not in _S16_MOVEMENT:
        if node.op not in _S16_RULES:
            raise UnsupportedOpError(
                f"node {node.name!r} ({node.op}): the cortexm target has no int16 kernel for {node.op}; "
                f"int16 activations run {', '.join(sorted(_S16_RULES))} and data movement (quantize it int8)"
            )
        return _S16_RULES[node.op]
    w = node.inputs[1] if len(node.inputs) > 1 else None
    if node.op in _S4_RULES and w is not None and _t(graph, w).dtype == DType.i4:
        return _S4_RULES[node.op]
    return RULES[node.op]


@RULES.rule("detection_postprocess")
def _detection_postprocess(graph: Graph, node: Node, params: Prepared) -> Layer:
    """SSD post-processing in float32 (``kernels/rlx_detection_postprocess_f32.c``), its work buffers
    (decoded boxes, sort and NMS state, candidates) in planner scratch."""
    a = node.attrs
    _, n, stride = _shape(_t(graph, node.inputs[0]))
    m, dpc = int(a["max_detections"]), int(a["detections_per_class"])
    fields = {
        "num_boxes": n, "box_stride": stride, "num_classes": a["num_classes"],
        "score_columns": _shape(_t(graph, node.inputs[1]))[2], "max_detections": m, "detections_per_class": dpc,
        "regular": int(a["use_regular_nms"]), "score_threshold": np.float32(a["score_threshold"]),
        "iou_threshold": np.float32(a["iou_threshold"]),
        **{k: np.float32(a[k]) for k in ("y_scale", "x_scale", "h_scale", "w_scale")},
    }  # fmt: skip
    scratch = 4 * (8 * n + max(m, dpc) + 6 * (m + dpc)) + n  # RLX_DETECTION_SCRATCH
    args = [("ins",), ("outs",), ("scratch", "float")]
    return Layer("rlx_detection_postprocess_f32", "rlx_detection_params", fields, {}, args, scratch)
