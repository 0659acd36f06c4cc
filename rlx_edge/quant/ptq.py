"""Post-training quantization: a float graph plus a calibration record -> a quantized graph.

The result follows the numerics contract (ARCHITECTURE.md, the TFLite
quantization spec):

- activations per tensor, asymmetric int8, with the range nudged so that 0
  is exactly representable (TFLite's ``ChooseQuantizationParams``);
- conv / fully_connected weights per output channel along axis 0,
  depthwise weights along axis 3, symmetric int8 in [-127, 127], zero point 0;
- bias int32 with scale ``s_in * s_w[c]`` (int64 for 16x8). A bias the kernel
  cannot carry at that scale (see :func:`bias_weight_scales`) raises the
  channel's weight scale and re-quantizes its weights instead of clipping; what
  still clips, the raised scales and degenerate ranges are counted per tensor
  in ``metadata["quantization"]["numerics"]``, and a clip warns once;
- layer_norm / rms_norm: a constant gamma int16 symmetric per tensor and a
  constant beta int32 at the output's scale, zero point 0, in every scheme
  (ARCHITECTURE.md, "Integer semantics of transformer ops");
- softmax and logistic outputs fixed at scale 1/256, zero point -128; tanh at
  1/128, 0; log_softmax at 16/256, 127; l2_normalize at 1/128, 0; in int16
  softmax, logistic and tanh at 2**-15, 0; pooling, reshape and the other
  layout ops keep their input's parameters;
- ``shared_quant`` ops (maximum, minimum, select_v2: their kernels compare or
  copy stored values) share one set of parameters between their float inputs
  and output, from the union of their ranges: an input read only by such ops
  is made in them, another one is requantized (TFLite's QUANTIZE).

Schemes: ``int8``; ``int16x8`` (int16 activations, symmetric, zero point 0;
int8 weights; int64 bias); ``int4w`` (int4 weights in [-7, 7], stored one per
byte here and packed by targets; int8 activations).

The graph interface is int8 by default, like the MLPerf Tiny int8 models;
``float_interface=True`` keeps float inputs and outputs with quantize /
dequantize nodes at the edges. ``keep_float`` names nodes that stay in float
with dequantize / quantize around them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import OpDef, get_op
from rlx_edge.ir.shape import along_axis
from rlx_edge.ir.types import QuantParams
from rlx_edge.pipeline import PipelineOptions, optimize_graph
from rlx_edge.quant._control import CONTROL_OPS, quantize_control
from rlx_edge.quant.record import CalibrationRecord

# op -> weight channel axis
WEIGHTED = {"conv2d": 0, "depthwise_conv2d": 3, "fully_connected": 0, "transpose_conv2d": 0}
# Normalizations whose constant gamma is quantized int16 symmetric per tensor and constant beta
# int32 at the output's scale, in every scheme (ARCHITECTURE.md, "Integer semantics of
# transformer ops"); computed ones are activations like any other.
NORMS = ("layer_norm", "rms_norm")
F32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal float32: a scale below it is degenerate
# The accumulators each bias type's kernels take: int32 ones wrap past 2**31; the 16x8 (int64)
# requantization multiplies the accumulator by a 16-bit multiplier in int64, so TFLite Micro
# requires |acc| < 2**47 there. PTQ keeps every quantized bias within half of it (the other half
# is headroom for the products) and clips, counting, to the bound itself.
ACC_BOUND = {DType.i32: 2**31, DType.i64: 2**47}
MIN_MULTIPLIER = 2.0**-31  # quantize_multiplier flushes multipliers below 2**-32 to zero; a factor of 2 margin
# Which ops run on the integer path, which keep their input's parameters and which
# activation types their kernels take are read off the op declarations (OpDef).


class QuantizationWarning(UserWarning):
    """PTQ had to clip values to their integer range (counted in ``quantization.numerics``)."""


def integer_path(op: OpDef) -> bool:
    """Whether PTQ can put ``op`` on the integer path: it has integer semantics and converts nothing.

    The quantization ops (quantize, dequantize, requantize) move values between
    the float and integer paths; PTQ inserts them where it needs them. Recurrent
    ops (svdf) keep float: their state and time weights want types of their own
    (TFLite's int16 state), which PTQ does not choose yet. Control-flow ops
    (if_, while_, scan) are quantized with their subgraphs (``quant/_control.py``).
    """
    return op.has_int_reference and op.family not in ("quant", "recurrent")


@dataclass(frozen=True)
class Scheme:
    """One quantization scheme of the contract."""

    name: str
    act: DType
    symmetric_act: bool
    weight: DType
    weight_max: int
    bias: DType

    @property
    def act_range(self) -> tuple[int, int]:
        return self.act.min, self.act.max


SCHEMES = {
    "int8": Scheme("int8", DType.i8, False, DType.i8, 127, DType.i32),
    "int16x8": Scheme("int16x8", DType.i16, True, DType.i8, 127, DType.i64),
    "int4w": Scheme("int4w", DType.i8, False, DType.i4, 7, DType.i32),
}


def get_scheme(name: str | Scheme) -> Scheme:
    if isinstance(name, Scheme):
        return name
    try:
        return SCHEMES[name]
    except KeyError:
        raise RlxError(f"unknown quantization scheme {name!r}; use one of {', '.join(SCHEMES)}") from None


# parameter choice ----------------------------------------------------------------------
def choose_qparams(lo: float, hi: float, qmin: int, qmax: int) -> tuple[float, int]:
    """Scale and zero point for real range [lo, hi], as TFLite's ``ChooseQuantizationParams``.

    The range is widened to contain 0, and the zero point is rounded to an
    integer in [qmin, qmax] so that real 0 is exactly representable (padding
    and ReLU depend on it). The scale is rounded to float32, as stored.
    """
    rmin, rmax = min(float(lo), 0.0), max(float(hi), 0.0)
    if rmax - rmin <= 1e-30:  # all zero (or below float32's range): any scale represents it
        return float(np.float32(1.0 / (qmax - qmin))), qmin if rmin == 0.0 else 0
    scale = (rmax - rmin) / (qmax - qmin)
    zp_from_min = qmin - rmin / scale
    zp_from_max = qmax - rmax / scale
    err_min = abs(qmin) + abs(rmin / scale)
    err_max = abs(qmax) + abs(rmax / scale)
    zp = zp_from_min if err_min < err_max else zp_from_max
    zp = int(min(max(float(fp.round_half_away(np.float64(zp))), qmin), qmax))  # std::round, as TFLite
    return float(np.float32(scale)), zp


def symmetric_qparams(lo: float, hi: float, qmax: int) -> tuple[float, int]:
    """Symmetric (zero point 0) scale for range [lo, hi] over [-qmax, qmax]."""
    amax = max(abs(float(lo)), abs(float(hi)))
    return float(np.float32(amax / qmax if amax > 1e-30 else 1.0 / qmax)), 0


def activation_qparams(lo: float, hi: float, scheme: Scheme) -> QuantParams:
    if scheme.symmetric_act:
        s, zp = symmetric_qparams(lo, hi, scheme.act.max)
    else:
        s, zp = choose_qparams(lo, hi, *scheme.act_range)
    return QuantParams(s, zp, storage=scheme.act)


def quantize_weights(
    w: np.ndarray, axis: int, qmax: int, method: str = "minmax", steps: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel symmetric quantization of ``w`` along ``axis``: (int8 values in [-qmax, qmax], float32 scales).

    ``method="mse"`` shrinks each channel's range (down to half) where that
    lowers the squared rounding error, which matters for 4-bit weights.
    """
    wc = np.moveaxis(w.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)
    amax = np.abs(wc).max(axis=1)
    # an all-zero channel takes any scale; a tiny one gets float32's smallest normal scale, not 0
    scale = np.where(amax > 0, np.maximum(amax / qmax, F32_TINY), 1.0)
    if method == "mse":
        best = np.full(len(scale), np.inf)
        chosen = scale.copy()
        for a in np.linspace(0.5, 1.0, steps):
            s = np.where(amax > 0, np.maximum(a * amax / qmax, F32_TINY), 1.0)
            err = ((np.clip(np.round(wc / s[:, None]), -qmax, qmax) * s[:, None] - wc) ** 2).sum(axis=1)
            better = err < best
            best[better], chosen[better] = err[better], s[better]
        scale = chosen
    elif method != "minmax":
        raise RlxError(f"unknown weight quantization method {method!r}; use minmax or mse")
    scale32 = scale.astype(np.float32)
    return quantize_weights_at(w, axis, qmax, scale32), scale32


def quantize_weights_at(w: np.ndarray, axis: int, qmax: int, scale: np.ndarray) -> np.ndarray:
    """``w`` quantized with the given per-channel scales (float32, along ``axis``), clipped to [-qmax, qmax]."""
    per_channel = along_axis(np.asarray(scale, np.float32).astype(np.float64), axis, w.ndim)
    return np.clip(fp.round_half_away(w.astype(np.float64) / per_channel), -qmax, qmax).astype(np.int8)


def _f32_up(x: np.ndarray) -> np.ndarray:
    """float32 values no smaller than ``x`` (float64), up to float32's largest (a bias past it then clips)."""
    x = np.minimum(x, float(np.finfo(np.float32).max))
    f = x.astype(np.float32)
    low = f.astype(np.float64) < x  # never at float32's largest, which x does not exceed
    f[low] = np.nextafter(f[low], np.float32(np.inf))
    return f


def bias_weight_scales(
    bias: np.ndarray, s_in: float, s_out: float, w_scale: np.ndarray, bias_dtype: DType
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weight scales at which each channel's bias reaches the output: (scales, raised by (1) or (2), by (3) only).

    A channel's scale ``s_w`` is raised (never lowered) to the smallest float32
    where (1) the bias at scale ``s_in * s_w`` stays within half the
    accumulator bound of ``bias_dtype`` (``ACC_BOUND``), (2) a bias of half an
    output quantum or more does not meet a requantization multiplier
    ``s_in * s_w / s_out`` below ``MIN_MULTIPLIER`` (one that would flush to
    zero), and (3) the bias scale ``s_in * s_w`` is a normal float32. A channel
    with weights of 1e-30 and a bias of 0.3 then quantizes its weights to 0
    and keeps its bias, as TFLite's converter does.
    """
    a = np.abs(bias.astype(np.float64))
    for_bias = a / (s_in * (ACC_BOUND[bias_dtype] / 2))
    for_bias = _f32_up(np.where(a >= s_out / 2, np.maximum(for_bias, MIN_MULTIPLIER * s_out / s_in), for_bias))
    for_scale = _f32_up(np.full(a.shape, 2 * F32_TINY / s_in))  # 2x: s_in * s_w is rounded to float32
    need = np.maximum(for_bias, for_scale)
    by_bias = for_bias > w_scale
    by_scale = ~by_bias & (for_scale > w_scale)
    return np.where(by_bias | by_scale, need, w_scale).astype(np.float32), by_bias, by_scale


def dequantize_weights(q: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray:
    return q.astype(np.float64) * along_axis(scale.astype(np.float64), axis, q.ndim)


# the rewrite ------------------------------------------------------------------------------
def quantize(
    graph: Graph,
    record: CalibrationRecord,
    *,
    scheme: str | Scheme = "int8",
    float_interface: bool = False,
    keep_float: Iterable[str] = (),
    bias_correction: bool | None = None,
    weight_method: str = "minmax",
    optimize: bool = True,
    layer_schemes: Mapping[str, str | Scheme] | None = None,
) -> Graph:
    """Quantize ``graph`` with the ranges in ``record``; returns a new, verified graph.

    Parameters
    ----------
    graph:
        A float graph (HIR is lowered). With ``optimize`` (default) it first
        goes through the optimizer (:func:`rlx_edge.pipeline.optimize_graph`),
        as in :func:`rlx_edge.quant.calibrate.calibrate`, so value names match
        the record; give ``optimize=False`` for a graph optimized already.
    record:
        Calibration ranges of the graph's float values.
    scheme:
        ``int8``, ``int16x8`` or ``int4w``: the scheme of every node ``layer_schemes`` does not name.
    float_interface:
        Keep float graph inputs/outputs (quantize / dequantize at the edges);
        the default is an integer interface like the MLPerf int8 models.
    keep_float:
        Node names that stay float (dequantize / quantize are inserted around them).
    bias_correction:
        Subtract the mean output shift that weight rounding causes, computed
        from the per-channel input means in the record. Default (None): on for
        int4 weights, whose rounding error is large enough to shift outputs, off otherwise.
    weight_method:
        ``minmax`` or ``mse`` per-channel weight ranges.
    layer_schemes:
        Node name -> scheme, for a mixed-precision graph (what
        :func:`rlx_edge.quant.mixed.select_mixed` chooses). A named node takes
        that scheme's weights, bias and activation type; an unnamed node
        without weights takes the activation type of its first computed input
        (int8 where its op has no int16 kernel). A value read at another type
        than it was made in goes through a ``requantize`` node (TFLite's
        QUANTIZE between int8 and int16 regions). The metadata's scheme is
        then ``mixed`` and ``layers`` holds every node's scheme.
    """
    from rlx_edge.ir.verify import verify

    sch = get_scheme(scheme)
    g, _ = optimize_graph(graph, PipelineOptions(optimize=optimize))
    keep = set(keep_float)
    unknown = keep - {n.name for n in g.nodes}
    if unknown:
        raise RlxError(f"keep_float names no node of graph {g.name!r}: {', '.join(sorted(unknown))}")
    layers = {k: get_scheme(v) for k, v in (layer_schemes or {}).items()}
    unnamed = set(layers) - {n.name for n in g.nodes}
    if unnamed:
        raise RlxError(f"layer_schemes names no node of graph {g.name!r}: {', '.join(sorted(unnamed))}")
    q = _Quantizer(g, record, sch, float_interface, keep, bias_correction, weight_method, layers).run()
    verify(q)
    numerics = q.metadata["quantization"]["numerics"]
    if numerics["silent_clips"]:
        clipped = [t for t, c in numerics["tensors"].items() if c.get("clipped")]
        more = f" and {len(clipped) - 3} more" if len(clipped) > 3 else ""
        warnings.warn(
            f"quantize {g.name!r} ({sch.name}): {numerics['silent_clips']} values clipped to their integer "
            f"range in {len(clipped)} tensors ({', '.join(clipped[:3])}{more}); "
            "the counts are in metadata['quantization']['numerics']",
            QuantizationWarning,
            stacklevel=2,
        )
    return q


class _Quantizer:
    def __init__(
        self,
        g: Graph,
        record: CalibrationRecord,
        scheme: Scheme,
        float_interface: bool,
        keep: set[str],
        bias_correction: bool | None,
        weight_method: str,
        layers: dict[str, Scheme] | None = None,
    ) -> None:
        self.g, self.rec, self.s = g, record, scheme
        self.float_interface, self.keep = float_interface, keep
        self.bias_correction, self.weight_method = bias_correction, weight_method
        self.layers = layers or {}  # node name -> its scheme (mixed precision)
        self._node_scheme: dict[str, Scheme] = {}
        self.qalt: dict[tuple[str, DType], str] = {}  # (original value, type) -> a requantized version
        self.out = Graph(g.name, "mir")
        self.out.metadata = dict(g.metadata)
        self.qv: dict[str, str] = {}  # original value -> name of its quantized version
        self.fv: dict[str, str] = {}  # original value -> name of its float version
        self.prod = {o: n for n in g.nodes for o in n.outputs}
        self._aq: dict[tuple[str, DType], QuantParams] = {}
        self._readers: dict[str, list[Node]] = {}
        for n in g.nodes:
            for v in dict.fromkeys(n.inputs):
                if v is not None:
                    self._readers.setdefault(v, []).append(n)
        self._shared: dict[tuple[str, DType], QuantParams] = {}  # (shared_quant node, type) -> its parameters
        self._as: dict[tuple[str, DType, float, int], str] = {}  # (value, type, scale, zp) -> a version so quantized
        self.decisions: dict[str, str] = {}
        self.counts: dict[str, dict[str, Any]] = {}  # tensor -> what its quantization clipped or adjusted
        # a control-flow subgraph's inputs: the parameters its op passes it (quant/_control.py)
        self.input_quant: dict[str, QuantParams] = {}

    def note(self, tensor: str, node: str, **counts: int) -> None:
        """Count, for ``tensor`` (a value of the output graph, or an original value), what PTQ clipped or adjusted.

        ``clipped``: values saturated to their integer range (storage, or the
        int64 bias's accumulator bound): silent clips, which PTQ warns about;
        ``bias_adjusted``: channels whose weight scale was raised so the bias
        reaches the output; ``zero_range``: channels (or an activation) whose
        range is zero; ``tiny_scale``: scales raised to a normal float32;
        ``range_clipped``: weights clipped by the chosen (mse) range, by design.
        """
        counts = {k: int(v) for k, v in counts.items() if v}
        if counts:
            entry = self.counts.setdefault(tensor, {"node": node})
            for k, v in counts.items():
                entry[k] = entry.get(k, 0) + v

    # decisions -----------------------------------------------------------------------------
    def is_float(self, v: str) -> bool:
        return self.g.types[v].dtype.is_float

    def scheme_of(self, node: Node) -> Scheme:
        """The scheme ``node`` is quantized with: its own, else (mixed) its first computed input's activation type.

        Without ``layers`` every node takes the graph's scheme. In a mixed
        graph a node without weights follows the value it reads (so a pooling
        or reshape after an int16 conv stays int16 and needs no requantize),
        and drops to int8 where its op has no int16 kernel.
        """
        if not self.layers or node.name in self.layers or node.op in WEIGHTED:
            return self.layers.get(node.name, self.s)
        got = self._node_scheme.get(node.name)
        if got is None:
            computed = [v for v in node.inputs if v is not None and v not in self.g.params]
            got = self.value_scheme(computed[0]) if computed else self.s
            if got.act not in get_op(node.op).int_dtypes:
                got = SCHEMES["int8"]
            self._node_scheme[node.name] = got
        return got

    def value_scheme(self, v: str) -> Scheme:
        """The scheme value ``v`` is made in: its producer's; a graph input takes its first weighted reader's."""
        node = self.prod.get(v)
        if node is not None:
            return self.scheme_of(node)
        if self.layers and v not in self.g.params:
            for r in self.g.nodes:
                if v in r.inputs and (r.name in self.layers or r.op in WEIGHTED):
                    return self.layers.get(r.name, self.s)
        return self.s

    def quantized_node(self, node: Node) -> str | None:
        """None when ``node`` runs on the integer path, else why it stays float."""
        if node.name in self.keep:
            return "kept in float (keep_float)"
        opdef = get_op(node.op)
        if not integer_path(opdef):
            if opdef.has_int_reference and opdef.family == "recurrent":
                return f"PTQ does not quantize {node.op} (its state); import an integer TFLite model instead"
            return f"{node.op} has no integer kernel"
        if self.scheme_of(node).act not in opdef.int_dtypes:
            return f"{node.op} has an integer kernel for {', '.join(map(str, opdef.int_dtypes))} only"
        out_dtypes = {self.g.types[o].dtype for o in node.outputs}
        # a bool result (a comparison) or an index (argmax) is exact on either path: it stays as it
        # is, unquantized
        exact = {d for d in out_dtypes if d == DType.bool or d.is_int}
        if out_dtypes - {DType.f32} - exact:
            return "its output is not f32"
        if exact and not any(v is not None and self.is_float(v) for v in node.inputs):
            return "it reads no float values"
        if node.op in WEIGHTED:
            w = node.inputs[1]
            b = node.inputs[2] if len(node.inputs) > 2 else None
            if w not in self.g.params or (b is not None and b not in self.g.params):
                return "its weights are computed at run time"
        return None

    def aq(self, v: str, scheme: Scheme | None = None) -> QuantParams:
        """Quantization parameters of float value ``v`` in ``scheme``'s activation type (default: its own)."""
        natural = self.value_scheme(v)
        sch = scheme or natural
        got = self._aq.get((v, sch.act))
        if got is not None:
            return got
        node = self.prod.get(v)
        if v in self.g.params:
            arr = self.g.params[v]
            qp = activation_qparams(float(arr.min(initial=0.0)), float(arr.max(initial=0.0)), sch)
        elif (
            node is not None and node.op in ("softmax", "log_softmax", "l2_normalize", "sigmoid", "tanh")
            and node.name not in self.keep and sch.act == natural.act
        ):  # fmt: skip
            if node.op == "log_softmax":  # TFLite Micro's int8 LOG_SOFTMAX requires these
                qp = QuantParams(16.0 / 256, 127, storage=DType.i8)
            elif node.op == "l2_normalize":  # and its int8 L2_NORMALIZATION assumes these
                qp = QuantParams(1.0 / 128, 0, storage=DType.i8)
            elif sch.act == DType.i16:
                qp = QuantParams(1.0 / 32768, 0, storage=DType.i16)
            elif node.op == "tanh":
                qp = QuantParams(1.0 / 128, 0, storage=DType.i8)
            else:
                qp = QuantParams(1.0 / 256, -128, storage=DType.i8)
        elif (
            node is not None and get_op(node.op).passthrough_quant and self.quantized_node(node) is None
            and sch.act == natural.act
        ):  # fmt: skip
            qp = self.aq(node.inputs[0], sch)
        elif node is not None and get_op(node.op).shared_quant and self.quantized_node(node) is None:
            qp = self.shared_qp(node, sch)
        elif (shared := self._shared_readers_qp(v, sch)) is not None:
            qp = shared  # made in the parameters its readers share: no requantize between
        else:
            lo, hi = self.rec[v].scalar()
            qp = activation_qparams(lo, hi, sch)
            if sch.act == natural.act:  # count a value's zero range once, not once per type it is read in
                self.note(v, node.name if node is not None else "input", zero_range=max(abs(lo), abs(hi)) <= 1e-30)
        self._aq[(v, sch.act)] = qp
        return qp

    def shared_qp(self, node: Node, scheme: Scheme) -> QuantParams:
        """One set of parameters for a ``shared_quant`` node's float inputs and output: the union of their ranges."""
        got = self._shared.get((node.name, scheme.act))
        if got is not None:
            return got
        lo, hi = 0.0, 0.0
        for v in [*node.inputs, *node.outputs]:
            if v is None or not self.is_float(v):
                continue  # the condition of a select
            if v in self.g.params:
                arr = self.g.params[v]
                a, b = float(arr.min(initial=0.0)), float(arr.max(initial=0.0))
            else:
                a, b = self.rec[v].scalar()
            lo, hi = min(lo, a), max(hi, b)
        got = activation_qparams(lo, hi, scheme)
        self._shared[(node.name, scheme.act)] = got
        return got

    def _shared_readers_qp(self, v: str, scheme: Scheme) -> QuantParams | None:
        """The parameters of the shared_quant node(s) that read ``v`` when they are its only readers and agree."""
        readers = self._readers.get(v, [])
        if v in self.g.params or not readers:
            return None
        qps = []
        for r in readers:
            if not get_op(r.op).shared_quant or self.quantized_node(r) is not None:
                return None
            if self.scheme_of(r).act != scheme.act:
                return None
            qps.append(self.shared_qp(r, scheme))
        return qps[0] if all(q == qps[0] for q in qps[1:]) else None

    # value access ------------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        cand, k = base, 1
        taken = self.out.types
        while cand in taken or any(n.name == cand for n in self.out.nodes):
            cand, k = f"{base}_{k}", k + 1
        return cand

    def qname(self, v: str, scheme: Scheme | None = None) -> str:
        """The quantized version of ``v`` in the output graph, made on demand.

        In ``scheme``'s activation type (default: the type ``v`` is made in); a
        value made quantized in another type is requantized, once per type.
        """
        if not self.is_float(v):
            return self.fname(v)  # integer data (indices, an integer parameter) is used as it is
        act = (scheme or self.value_scheme(v)).act
        have = self.qv.get(v)
        if have is not None and self.out.types[have].dtype == act:
            return have
        if (v, act) in self.qalt:
            return self.qalt[(v, act)]
        qp = self.aq(v, scheme)
        node = self.prod.get(v)
        made_float = v in self.fv and (node is None or self.decisions.get(node.name) != "quantized")
        if v in self.g.params:
            arr = self.g.params[v]
            from rlx_edge.ir.ops.quant import affine_quantize

            name = self.out.param(self._fresh(f"{v}/quant"), affine_quantize(arr, qp, qp.storage), qp).name
        elif have is not None and not made_float:
            name = self._fresh(f"{v}/requant")
            self.out.add_node("requantize", [have], {"dtype": act}, name=name, out_quant=qp)
        else:
            src = self.fv[v]
            name = self._fresh(f"{v}/quant")
            self.out.add_node("quantize", [src], {"dtype": act}, name=name, out_quant=qp)
        if have is None:
            self.qv[v] = name
        else:
            self.qalt[(v, act)] = name
        return name

    def qname_as(self, v: str, qp: QuantParams, scheme: Scheme) -> str:
        """``v`` quantized with exactly ``qp`` (a shared_quant node's input), made on demand: its quantized
        version where that has ``qp``, else a constant quantized so, or a quantize / requantize node."""
        if not self.is_float(v) or self.aq(v, scheme) == qp:
            return self.qname(v, scheme)
        key = (v, qp.storage, float(qp.scale[0]), int(qp.zero_point[0]))
        if key in self._as:
            return self._as[key]
        node = self.prod.get(v)
        made_float = v in self.fv and (node is None or self.decisions.get(node.name) != "quantized")
        if v in self.g.params:
            from rlx_edge.ir.ops.quant import affine_quantize

            name = self.out.param(self._fresh(f"{v}/quant"), affine_quantize(self.g.params[v], qp, qp.storage), qp).name
        elif made_float:
            name = self._fresh(f"{v}/quant")
            self.out.add_node("quantize", [self.fv[v]], {"dtype": qp.storage}, name=name, out_quant=qp)
        else:
            name = self._fresh(f"{v}/requant")
            self.out.add_node("requantize", [self.qname(v, scheme)], {"dtype": qp.storage}, name=name, out_quant=qp)
        self._as[key] = name
        return name

    def fname(self, v: str) -> str:
        """The float version of ``v`` in the output graph, made on demand."""
        if v in self.fv:
            return self.fv[v]
        if v in self.g.params:
            t = self.g.types[v]
            name = self.out.param(self._fresh(v), self.g.params[v], t.quant, dtype=t.dtype).name
        else:
            name = self._fresh(f"{v}/dequant")
            self.out.add_node("dequantize", [self.qv[v]], {"dtype": self.g.types[v].dtype}, name=name)
        self.fv[v] = name
        return name

    # the walk ------------------------------------------------------------------------------
    def run(self) -> Graph:
        g, out = self.g, self.out
        readers: dict[str, list[Node]] = {}
        for n in g.nodes:
            for v in n.inputs:
                if v is not None:
                    readers.setdefault(v, []).append(n)
        for v in g.inputs:
            t = g.types[v]
            quant_readers = [r for r in readers.get(v, []) if self.quantized_node(r) is None]
            forced = self.input_quant.get(v)
            if forced is not None:
                self._aq[(v, forced.storage)] = forced
                self.qv[v] = out.input(v, t.shape, forced.storage, forced).name
            elif t.dtype.is_float and t.quant is None and not self.float_interface and quant_readers:
                self.qv[v] = out.input(v, t.shape, self.value_scheme(v).act, self.aq(v)).name
            else:
                self.fv[v] = out.input(v, t.shape, t.dtype, t.quant).name
        for node in g.nodes:
            why = self.quantized_node(node)
            self.decisions[node.name] = why or "quantized"
            if why is None:
                self._quantized(node)
            else:
                self._float(node)
        for o in g.outputs:
            if not self.is_float(o):
                out.output(self.fv[o])
            elif self.float_interface:
                out.output(self._float_output(o))
            else:
                out.output(self.qv[o] if o in self.qv else self.fv[o])
        out.metadata["quantization"] = {
            "scheme": "mixed" if self.layers else self.s.name,
            "float_interface": self.float_interface,
            "values": {k: v for k, v in sorted(self.qv.items())},
            "float_nodes": {k: v for k, v in sorted(self.decisions.items()) if v != "quantized"},
            "numerics": self.numerics(),
        }
        if self.layers:  # every quantized node's scheme, the nodes without weights included
            out.metadata["quantization"]["layers"] = {
                n.name: self.scheme_of(n).name for n in g.nodes if self.decisions[n.name] == "quantized"
            }
        return out

    def numerics(self) -> dict[str, Any]:
        """Totals and per-tensor counts of :meth:`note` (activations named as in the output graph)."""
        tensors = {self.qv.get(t, t): c for t, c in sorted(self.counts.items())}

        def total(*keys: str) -> int:
            return sum(c.get(k, 0) for c in tensors.values() for k in keys)

        return {
            "silent_clips": total("clipped"),
            "bias_adjusted": total("bias_adjusted"),
            "degenerate": total("zero_range", "tiny_scale"),
            "tensors": tensors,
        }

    def _float_output(self, o: str) -> str:
        """A float output keeps its name: its quantized producer's value is renamed first."""
        if o in self.fv:
            return self.fv[o]
        qn = self.qv[o]
        if qn == o:  # free the name for the dequantize node
            new = self._fresh(f"{o}/q")
            from rlx_edge.ir.passes import rename_value

            rename_value(self.out, o, new)
            for n in self.out.nodes:  # a node may not carry the name of a value it does not produce
                if n.name == o:
                    n.name = new
            self.qv[o] = new
        self.out.add_node(
            "dequantize", [self.qv[o]], {"dtype": self.g.types[o].dtype}, name=self._fresh(o), out_names=[o]
        )
        self.fv[o] = o
        return o

    def _float(self, node: Node) -> None:
        ins = [None if v is None else self.fname(v) for v in node.inputs]
        outs = [self._fresh(o) for o in node.outputs]
        quants = [self.g.types[o].quant for o in node.outputs]
        self.out.add_node(node.op, ins, node.attrs, name=self._fresh(node.name), out_names=outs, out_quant=quants)
        self.fv.update(zip(node.outputs, outs))

    def _quantized(self, node: Node) -> None:
        if node.op in WEIGHTED:
            ins = self._weighted_inputs(node)
        elif node.op in NORMS:
            ins = self._norm_inputs(node)
        elif node.op in CONTROL_OPS:
            quantize_control(self, node)
            return
        elif get_op(node.op).shared_quant:
            sch = self.scheme_of(node)
            qp = self.shared_qp(node, sch)
            ins = [None if v is None else self.qname_as(v, qp, sch) for v in node.inputs]
        else:
            sch = self.scheme_of(node)
            ins = [None if v is None else self.qname(v, sch) for v in node.inputs]
        outs = [self._fresh(o) for o in node.outputs]
        quants = [None if not self.g.types[o].dtype.is_float else self.aq(o) for o in node.outputs]
        self.out.add_node(node.op, ins, node.attrs, name=self._fresh(node.name), out_names=outs, out_quant=quants)
        for o, name, q in zip(node.outputs, outs, quants):
            # a bool or index result is no quantized version of a float: readers take it as it is (fname)
            (self.qv if q is not None else self.fv)[o] = name

    def _weighted_inputs(self, node: Node) -> list[str | None]:
        x, w = node.inputs[0], node.inputs[1]
        b = node.inputs[2] if len(node.inputs) > 2 else None
        sch = self.scheme_of(node)
        xq = self.qname(x, sch)
        s_in = float(self.aq(x, sch).scale[0])
        axis = WEIGHTED[node.op]
        qmax = sch.weight_max
        # default: bias correction for int4 weights, whose rounding error shifts outputs (see quantize)
        correct = sch.weight == DType.i4 if self.bias_correction is None else self.bias_correction
        warr = self.g.params[w]
        out_ch = warr.shape[axis]
        bias0 = self.g.params[b].astype(np.float64) if b is not None else np.zeros(out_ch)
        if not (np.isfinite(warr).all() and np.isfinite(bias0).all()):
            raise RlxError(f"node {node.name!r} ({node.op}): weights or bias hold inf or NaN; PTQ needs finite values")
        wq, ws = quantize_weights(warr, axis, qmax, self.weight_method)
        has_bias = b is not None or correct
        bias, raised, tiny = bias0, np.zeros(out_ch, bool), np.zeros(out_ch, bool)
        for _ in range(3):  # a raised scale moves the bias correction: check again, at most twice
            if correct:
                bias = bias0 - self._bias_shift(node, warr, dequantize_weights(wq, ws, axis) - warr)
            if not has_bias:
                break
            s_out = float(self.aq(node.outputs[0]).scale[0])
            new_ws, by_bias, by_scale = bias_weight_scales(bias, s_in, s_out, ws, sch.bias)
            if not (by_bias | by_scale).any():
                break
            raised |= by_bias  # a zero or denormal bias scale alone is a degenerate scale, not a bias adjustment
            tiny |= by_scale
            ws = new_ws
            wq = quantize_weights_at(warr, axis, qmax, ws)
        wq_name = self._fresh(f"{w}/quant")
        self._note_weights(wq_name, node, warr, axis, ws, qmax)
        wqp = QuantParams(ws, np.zeros(out_ch, np.int64), axis=axis, storage=sch.weight)
        wname = self.out.param(wq_name, wq, wqp, dtype=sch.weight).name
        if not has_bias:
            return [xq, wname]
        bscale = (np.float32(s_in) * ws).astype(np.float32)
        lo, hi = -ACC_BOUND[sch.bias], ACC_BOUND[sch.bias] - 1  # int32's range; int64: -2**47 <= acc < 2**47
        bqf = fp.round_half_away(bias / bscale.astype(np.float64))  # bscale is a normal float32 (see above)
        bq = np.clip(bqf, lo, hi).astype(sch.bias.numpy)  # exact: the bounds are integers below 2**53
        bqp = QuantParams(bscale, np.zeros(out_ch, np.int64), axis=0, storage=sch.bias)
        bname = self.out.param(self._fresh(f"{b or node.name + '/bias'}/quant"), bq, bqp).name
        clipped = ((bqf < lo) | (bqf > hi)).sum()
        self.note(bname, node.name, clipped=clipped, bias_adjusted=raised.sum(), tiny_scale=(tiny & ~raised).sum())
        return [xq, wname, bname]

    def _norm_inputs(self, node: Node) -> list[str | None]:
        """layer_norm / rms_norm: x as an activation; constant gamma int16 symmetric per tensor (it scales
        the normalized value directly, so its rounding error reaches the output undamped: 16 bits keep it
        far below an output step), constant beta int32 at the output's scale (added after the
        requantization: at most half an output step off)."""
        sch = self.scheme_of(node)
        ins: list[str | None] = [self.qname(node.inputs[0], sch)]
        for i, v in enumerate(node.inputs[1:], start=1):
            if v is None or v not in self.g.params:
                ins.append(None if v is None else self.qname(v, sch))
                continue
            arr = self.g.params[v].astype(np.float64)
            if not np.isfinite(arr).all():
                raise RlxError(f"node {node.name!r} ({node.op}): {v} holds inf or NaN; PTQ needs finite values")
            if i == 1:
                s, _ = symmetric_qparams(float(arr.min(initial=0.0)), float(arr.max(initial=0.0)), DType.i16.max)
                dtype = DType.i16
            else:
                s, dtype = float(self.aq(node.outputs[0]).scale[0]), DType.i32
            qf = fp.round_half_away(arr / s)
            lo, hi = dtype.min, dtype.max
            name = self._fresh(f"{v}/quant")
            q = np.clip(qf, lo, hi).astype(dtype.numpy)
            ins.append(self.out.param(name, q, QuantParams(s, 0, storage=dtype), dtype=dtype).name)
            self.note(name, node.name, clipped=((qf < lo) | (qf > hi)).sum())
        return ins

    def _note_weights(self, name: str, node: Node, w: np.ndarray, axis: int, scale: np.ndarray, qmax: int) -> None:
        """Count a weight tensor's zero channels, floored scales and clipped values."""
        wc = np.moveaxis(w.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)
        amax = np.abs(wc).max(axis=1)
        over = (fp.round_half_away(np.abs(wc) / scale.astype(np.float64)[:, None]) > qmax).sum()
        by_design = self.weight_method == "mse"  # mse chooses ranges that clip the largest weights
        self.note(
            name,
            node.name,
            zero_range=(amax == 0).sum(),
            tiny_scale=((amax > 0) & (amax / qmax < F32_TINY)).sum(),
            clipped=0 if by_design else over,
            range_clipped=over if by_design else 0,
        )

    def _bias_shift(self, node: Node, w: np.ndarray, dw: np.ndarray) -> np.ndarray:
        """E[y_quantized_weights - y] per output channel, from the input's per-channel mean."""
        x = node.inputs[0]
        r = self.rec[x]
        if r.mean is None:
            raise RlxError(f"bias correction needs input means; the record has none for {x!r}")
        mean = r.mean
        if node.op == "conv2d":
            groups = node.attrs["groups"]
            o, _, _, ig = w.shape
            m = mean.reshape(groups, 1, ig)  # channel means per group
            dwg = dw.sum(axis=(1, 2)).reshape(groups, o // groups, ig)
            return (dwg * m).sum(axis=2).reshape(o)
        if node.op == "depthwise_conv2d":
            mult = node.attrs["depth_multiplier"]
            return dw[0].sum(axis=(0, 1)) * np.repeat(mean, mult)
        if node.op == "transpose_conv2d":  # an output pixel takes 1 / (sh * sw) of the taps on average
            sh, sw = node.attrs["strides"]
            return dw.sum(axis=(1, 2)) @ mean / (sh * sw)
        return dw @ mean


def quantization_summary(graph: Graph) -> dict[str, Any]:
    """The ``quantization`` metadata :func:`quantize` leaves on its result (scheme, value map, float nodes)."""
    return dict(graph.metadata.get("quantization", {}))


def cli_quantize(
    graph: Graph,
    out: str,
    *,
    data: str | None = None,
    record: str | None = None,
    scheme: str = "int8",
    method: str = "minmax",
    report: str | None = None,
    float_interface: bool = False,
    target_sqnr: float | None = None,
    mixed_schemes: Iterable[str] | None = None,
) -> tuple[Graph, dict[str, Any] | None]:
    """``rlx-edge quantize MODEL (--data D.npz | --record REC.json) -o OUT.rlx [--scheme S] [--method M] [--report R]``.

    Calibrates from ``data`` (with ``method``) unless a saved ``record`` is
    given, quantizes and saves the ``.rlx`` file. With ``data`` it also
    measures the quantization report (per-layer SQNR, output error) on the
    same samples, for the summary the command prints, and writes it to
    ``report`` when given. Returns the quantized graph and the report (None
    without ``data``: a record holds ranges, not samples to measure on).

    ``scheme="mixed"`` chooses a scheme per layer
    (:func:`rlx_edge.quant.mixed.select_mixed`) so that the output SQNR on
    ``data`` is at least ``target_sqnr`` dB, among ``mixed_schemes`` (default
    all three); the report then has a ``mixed`` section (per-layer scheme,
    sensitivity and flash; total flash and arena; the measured output SQNR).
    """
    from rlx_edge.data import load_arrays
    from rlx_edge.ir.serialize import save
    from rlx_edge.quant.calibrate import calibrate
    from rlx_edge.quant.report import quantization_report, save_report

    if (data is None) == (record is None):
        raise RlxError("give exactly one of --data and --record")
    if report is not None and data is None:
        raise RlxError("--report needs --data (the samples to compare float and quantized outputs on)")
    mixed = scheme == "mixed"
    if mixed and (target_sqnr is None or data is None):
        raise RlxError("--scheme mixed needs --target-sqnr DB and --data (it measures each candidate on the samples)")
    if not mixed and (target_sqnr is not None or mixed_schemes is not None):
        raise RlxError("--target-sqnr and --mixed-schemes choose schemes per layer; give them with --scheme mixed")
    arrays = load_arrays(data) if data is not None else None
    rec = CalibrationRecord.load(record) if record is not None else None
    # The optimizer runs once, here; calibration, quantization and the report all see its result.
    g, _ = optimize_graph(graph)
    if rec is None:
        rec = calibrate(g, arrays, method=method, progress=True, optimize=False)
    chosen = None
    if mixed:
        from rlx_edge.quant.mixed import LEVELS, select_mixed

        levels = tuple(mixed_schemes) if mixed_schemes is not None else LEVELS
        chosen = select_mixed(
            g, rec, arrays, target_sqnr, schemes=levels, float_interface=float_interface, optimize=False
        )
        q = chosen.graph
    else:
        q = quantize(g, rec, scheme=scheme, float_interface=float_interface, optimize=False)
    save(q, out)
    if arrays is None:
        return q, None
    rep = quantization_report(g, q, arrays, optimize=False)
    if chosen is not None:
        rep["mixed"] = chosen.to_json()
    if report is not None:
        save_report(rep, report)
    return q, rep
