"""The op registry: every op is declared exactly once (ARCHITECTURE.md).

An op declaration names its inputs and typed attributes; decorators attach
its type inference, its float reference (numpy), optionally its integer
semantics split as TFLite Micro splits kernels (``prepare``: the frozen
integer parameters, once per node; ``eval``: the arithmetic with them), its
MAC count and, for HIR block ops, its lowering to MIR::

    conv2d = defop("conv2d", family="conv", inputs=("x", "w", "b?"),
                   attrs={"strides": Attr("ints", (1, 1)), ...})

    @conv2d.infer
    def _(x, w, b, *, strides, ...): -> TensorType

    @conv2d.reference
    def _(x, w, b, *, strides, ...): -> np.ndarray

    @conv2d.prepare
    def _(ctx: QContext, *, strides, ...): -> dict   # multipliers, shifts, clamps...

    @conv2d.eval
    def _(p: Prepared, x, w, b, *, strides, ...): -> np.ndarray

Differentiable ops also declare ``jvp`` and ``vjp`` rules (and, where
numpy broadcasting does not batch them, ``batch``), which build graph nodes
for :mod:`rlx_edge.autodiff`; see :meth:`OpDef.vjp`.

Inputs marked ``name?`` are optional (``None`` when absent); ``*name`` is
variadic (any number, at least one). Targets never touch this table; they
keep their own rule tables keyed by op name (see ``rlx_edge.targets``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType, as_dtype
from rlx_edge.ir.ops._plugins import GROUP, OpRegistry
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.types import TensorType

REQUIRED: Any = object()

_KINDS = ("int", "float", "str", "bool", "ints", "floats", "dtype", "int?", "ints?", "graph")


@dataclass(frozen=True)
class Attr:
    """A typed attribute of an op.

    ``kind`` is one of int, float, str, bool, ints, floats, dtype, or int? /
    ints? (which also accept None), or graph (a subgraph: a closed
    :class:`~rlx_edge.ir.graph.Graph` of control-flow ops, ``ir/ops/control.py``).
    ``choices`` restricts str attributes.
    """

    kind: str
    default: Any = REQUIRED
    choices: tuple | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        assert self.kind in _KINDS, self.kind

    def coerce(self, op: str, name: str, value: Any) -> Any:
        """Convert ``value`` to this attribute's canonical form or raise OpError."""
        kind = self.kind
        if value is None and kind.endswith("?"):
            return None
        kind = kind.rstrip("?")
        try:
            if kind == "int":
                if isinstance(value, bool) or int(value) != value:
                    raise ValueError
                return int(value)
            if kind == "float":
                return float(value)
            if kind == "bool":
                if not isinstance(value, (bool, np.bool_)):
                    raise ValueError
                return bool(value)
            if kind == "str":
                if not isinstance(value, str):
                    raise ValueError
                if self.choices is not None and value not in self.choices:
                    raise OpError(
                        f"{op}: attribute {name}={value!r} must be one of {', '.join(map(repr, self.choices))}"
                    )
                return value
            if kind == "ints":
                if isinstance(value, (int, np.integer)):
                    value = (value,)
                out = tuple(int(v) for v in value)
                if any(o != v for o, v in zip(out, value)):
                    raise ValueError
                return out
            if kind == "floats":
                if isinstance(value, (int, float, np.number)):
                    value = (value,)
                return tuple(float(v) for v in value)
            if kind == "dtype":
                return as_dtype(value)
            if kind == "graph":
                from rlx_edge.ir.graph import Graph  # graph.py imports this module

                if not isinstance(value, Graph):
                    raise ValueError
                return value
        except OpError:
            raise
        except Exception:
            raise OpError(f"{op}: attribute {name}={value!r} is not a valid {self.kind}") from None
        raise AssertionError(kind)

    def to_json(self, value: Any) -> Any:
        if isinstance(value, DType):
            return value.value
        if isinstance(value, tuple):
            return list(value)
        return value


@dataclass(frozen=True)
class QContext:
    """What ``prepare`` (and a typed float reference) reads besides the attributes.

    ``in_types`` and ``out_types`` carry shapes, dtypes and quantization
    parameters of the node's inputs (``None`` for absent optional inputs) and
    outputs.
    """

    node: str
    in_types: tuple[TensorType | None, ...]
    out_types: tuple[TensorType, ...]

    @property
    def quantized(self) -> bool:
        """Whether the node computes on quantized integers (any quantized integer value)."""
        return any(t is not None and t.quant is not None and t.dtype.is_int for t in (*self.in_types, *self.out_types))


@dataclass
class OpDef:
    """One op's declaration. Create with :func:`defop`."""

    name: str
    family: str
    inputs: tuple[str, ...]
    attrs: dict[str, Attr]
    num_outputs: int | Callable[[dict], int] = 1
    stage: str = "mir"  # "mir" or "hir" (block ops that lower to MIR)
    doc: str = ""
    inplace: bool = False  # output may reuse the first input's memory (elementwise)
    typed: bool = False  # reference needs the node's types (QContext) as first argument
    view: bool = False  # output is the first input's bytes with another shape (reshape)
    # Quantized, the output has the first input's quantization parameters: the integer
    # kernel moves or picks stored values and never rescales (TFLite requires it of
    # reshape, pooling, pad...). PTQ gives such outputs their input's parameters.
    passthrough_quant: bool = False
    # Quantized, the float inputs and the output share one set of parameters: the integer
    # kernel compares or copies stored values of several inputs (TFLite's MAXIMUM, MINIMUM,
    # SELECT_V2). PTQ gives them one range, the union of theirs.
    shared_quant: bool = False
    # Activation storage types the integer semantics cover; PTQ keeps the op in float
    # under a scheme whose activations are of another type.
    int_dtypes: tuple[DType, ...] = (DType.i8, DType.i16)
    # Autodiff (rlx_edge.autodiff): False makes a gradient through the op an error
    # (argmax, quantize...); ``elementwise`` ops broadcast like numpy, so vmap batches
    # them without a rule of their own.
    differentiable: bool = True
    elementwise: bool = False
    # The declared derivative is an estimator (straight-through), not the derivative of the
    # float reference: tests compare it with its own rule rather than with jax.grad.
    surrogate_grad: bool = False
    _infer: Callable | None = field(default=None, repr=False)
    _reference: Callable | None = field(default=None, repr=False)
    _prepare: Callable | None = field(default=None, repr=False)
    _eval: Callable | None = field(default=None, repr=False)
    _bind: Callable | None = field(default=None, repr=False)
    _macs: Callable | None = field(default=None, repr=False)
    _lower: Callable | None = field(default=None, repr=False)
    _sample: Callable | None = field(default=None, repr=False)
    _jvp: Callable | None = field(default=None, repr=False)
    _vjp: Callable | None = field(default=None, repr=False)
    _batch: Callable | None = field(default=None, repr=False)
    _written: Callable | None = field(default=None, repr=False)

    # decorators ---------------------------------------------------------
    def infer(self, fn: Callable) -> Callable:
        self._infer = fn
        return fn

    def reference(self, fn: Callable) -> Callable:
        self._reference = fn
        return fn

    def prepare(self, fn: Callable) -> Callable:
        """Attach the integer ``Prepare``: ``fn(ctx: QContext, **attrs) -> dict`` of frozen parameters.

        It computes, once per node, every integer the kernel needs from the
        node's types: multipliers and shifts (via :mod:`rlx_edge.ir.fixedpoint`),
        zero points, clamps, lookup tables, folded biases. Planning stores the
        result in ``Program.quant``; targets read it and compute none of it.
        """
        self._prepare = fn
        return fn

    def eval(self, fn: Callable) -> Callable:
        """Attach the integer ``Eval``: ``fn(params: Prepared, *inputs, **attrs) -> array(s)``.

        Written against the inputs' array namespace (numpy or jax.numpy, see
        :func:`rlx_edge.ir.fixedpoint.namespace`) where it can be, so the
        reference and the JAX target run the same code.
        """
        self._eval = fn
        return fn

    def bind(self, fn: Callable) -> Callable:
        """Attach a numpy fast path of ``eval`` for one node: ``fn(params, consts, **attrs) -> kernel | None``.

        ``consts`` holds the node's constant inputs (weights, biases) at their
        positions and None for the others. The returned ``kernel(*inputs)``
        computes exactly what ``eval(params, *inputs, **attrs)`` does, with
        whatever depends only on ``params`` and ``consts`` (re-laid-out
        weights, folded biases) computed once; it owns that data, so later
        changes to the constants do not reach it. None: use ``eval``. The
        reference interpreter binds each node once per run plan.
        """
        self._bind = fn
        return fn

    def macs(self, fn: Callable) -> Callable:
        self._macs = fn
        return fn

    def written(self, fn: Callable) -> Callable:
        """Attach which output elements the op defines: ``fn(outputs, **attrs) -> [mask or None, ...]``.

        For ops whose contract leaves part of an output unspecified (TFLite's detection
        post-processing writes only its first ``num_detections`` rows; TFLite Micro leaves the rest
        as the arena held them): comparisons with another implementation look at the masked
        elements only. None (the default, and per output): every element is defined.
        """
        self._written = fn
        return fn

    def written_masks(self, outputs: Sequence[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray | None]:
        """Per output, the mask of the elements the op defines (None: all), from the outputs ``written`` reads."""
        if self._written is None:
            return [None] * len(outputs)
        return list(self._written([np.asarray(o) for o in outputs], **attrs))

    def lower(self, fn: Callable) -> Callable:
        self._lower = fn
        return fn

    def sample(self, fn: Callable) -> Callable:
        """Attach a generator of valid calls: ``fn(rng) -> (inputs, attrs)``.

        ``rng`` is a ``numpy.random.Generator``; ``inputs`` is a list of arrays
        (``None`` for absent optional inputs) and ``attrs`` a dict. Property
        tests and the (op x target) test draw from it, so it should cover the
        op's dtypes, ranks and attribute values, including edge cases.
        """
        self._sample = fn
        return fn

    def jvp(self, fn: Callable) -> Callable:
        """Attach the forward-mode rule: ``fn(e, primals, outputs, tangents, **attrs) -> [tangent per output]``.

        Same conventions as :meth:`vjp`: ``tangents`` has one entry per input
        (``None`` where the input's tangent is zero), and the rule returns one
        tangent per output (``None`` for a zero tangent), built with ``e``.
        """
        self._jvp = fn
        return fn

    def vjp(self, fn: Callable) -> Callable:
        """Attach the reverse-mode rule: ``fn(e, primals, outputs, cotangents, **attrs) -> [cotangent per input]``.

        Rules build graph nodes; they never compute numbers. ``e`` is an
        :class:`rlx_edge.ir.emitter.Emitter` over the graph being produced:
        ``e.mul(a, b)``, ``e.conv2d(x, w, strides=...)`` (every op, as on
        ``Graph``), ``e.const(array, like=t)``, ``e.sum_to(t, shape)`` (undo
        numpy broadcasting), ``e.broadcast_to``, ``e.greater(t, c)`` /
        ``e.less(t, c)`` (0/1 masks), ``e.fail(why)`` (an OpError naming the
        node). ``primals`` are the node's inputs as Tensors of that graph
        (``None`` for absent optional inputs, padded like ``infer``),
        ``outputs`` its primal outputs, ``cotangents`` one per output (``None``
        when no gradient reaches it; at least one is given). The rule returns
        one cotangent per input, each of its input's shape and dtype, ``None``
        for zero (or for an absent input). The transforms drop what no output
        needs, so a rule may build every input's cotangent. Worked example,
        ``mul`` (numpy broadcasting)::

            @mul.vjp
            def _(e, primals, outputs, cotangents, *, activation):
                a, b = primals
                ct = e.activation_grad(cotangents[0], outputs[0], activation)
                return [e.sum_to(e.mul(ct, b), a.shape), e.sum_to(e.mul(ct, a), b.shape)]

        A straight-through estimator (fake quantization) passes ``ct`` on to
        its input unchanged: ``return [cotangents[0], None, None]``.
        Non-differentiable ops are declared with ``defop(..., differentiable=False)``;
        zero-gradient ones (floor, ceil, round) return ``[None]``.
        """
        self._vjp = fn
        return fn

    def batch(self, fn: Callable) -> Callable:
        """Attach a vmap rule: ``fn(e, inputs, batched, **attrs) -> [output per output]``.

        ``inputs`` are Tensors whose batched ones (``batched[i]`` true) carry the
        batch at axis 0; the rule returns every output batched at axis 0.
        Elementwise ops (``defop(..., elementwise=True)``) need none; an op
        without a rule is batched by unrolling it over the batch.
        """
        self._batch = fn
        return fn

    def draw(self, rng: np.random.Generator) -> tuple[list, dict[str, Any], list | None, list | None]:
        """One sampled call: ``(inputs, attrs, out_quant, in_quant)``.

        A sampler returns ``(inputs, attrs)``, optionally followed by
        ``out_quant`` (QuantParams per output, or None) and ``in_quant``
        (QuantParams per input, or None). Typed and quantized ops need them.
        """
        if self._sample is None:
            raise NotImplementedError(f"op {self.name} declares no sampler")
        got = tuple(self._sample(rng))
        inputs, attrs = got[0], got[1]
        out_quant = got[2] if len(got) > 2 else None
        in_quant = got[3] if len(got) > 3 else None
        return list(inputs), dict(attrs), out_quant, in_quant

    # queries ------------------------------------------------------------
    @property
    def variadic(self) -> bool:
        return any(i.startswith("*") for i in self.inputs)

    @property
    def has_int_reference(self) -> bool:
        return self._eval is not None

    @property
    def has_prepare(self) -> bool:
        return self._prepare is not None

    def input_names(self, n: int) -> list[str]:
        """Names of ``n`` actual inputs (variadic ones numbered)."""
        names: list[str] = []
        for spec in self.inputs:
            if spec.startswith("*"):
                names += [f"{spec[1:]}{i}" for i in range(n - len(names))]
            else:
                names.append(spec.rstrip("?"))
        return names[:n]

    def check_arity(self, n: int, where: str) -> None:
        required = sum(1 for s in self.inputs if not s.endswith("?") and not s.startswith("*"))
        if self.variadic:
            if n < max(required, 1):
                raise OpError(f"{where}: {self.name} needs at least {max(required, 1)} inputs, got {n}")
            return
        if not required <= n <= len(self.inputs):
            want = str(required) if required == len(self.inputs) else f"{required} to {len(self.inputs)}"
            raise OpError(f"{where}: {self.name} takes {want} inputs ({', '.join(self.inputs)}), got {n}")

    def normalize_attrs(self, attrs: dict[str, Any], where: str = "") -> dict[str, Any]:
        """Fill defaults, coerce types, reject unknown or missing attributes."""
        where = where or self.name
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise OpError(
                f"{where}: {self.name} has no attribute {', '.join(sorted(unknown))}"
                f" (it has: {', '.join(self.attrs) or 'none'})"
            )
        out: dict[str, Any] = {}
        for name, spec in self.attrs.items():
            if name in attrs:
                out[name] = spec.coerce(where, name, attrs[name])
            elif spec.default is REQUIRED:
                raise OpError(f"{where}: {self.name} needs attribute {name!r}")
            else:
                out[name] = spec.coerce(where, name, spec.default)
        return out

    def count_outputs(self, attrs: dict[str, Any]) -> int:
        n = self.num_outputs
        return n(attrs) if callable(n) else n

    def _pad_inputs(self, inputs: Sequence[Any]) -> list[Any]:
        if self.variadic:
            return list(inputs)
        return list(inputs) + [None] * (len(self.inputs) - len(inputs))

    def run_infer(self, in_types: Sequence[TensorType | None], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
        if self._infer is None:
            raise NotImplementedError(f"op {self.name} declares no type inference")
        out = self._infer(*self._pad_inputs(in_types), **attrs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def run_reference(self, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> tuple[np.ndarray, ...]:
        if self._reference is None:
            raise NotImplementedError(f"op {self.name} has no float reference")
        if self.typed:
            raise TypeError(f"op {self.name} is typed: call run_typed_reference with a QContext")
        out = self._reference(*self._pad_inputs(inputs), **attrs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def run_typed_reference(
        self, ctx: QContext, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any]
    ) -> tuple[np.ndarray, ...]:
        """Float reference of a typed op (quantize, dequantize): it reads quantization off ``ctx``."""
        if not self.typed:
            return self.run_reference(inputs, attrs)
        out = self._reference(ctx, *self._pad_inputs(inputs), **attrs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def prepare_node(self, ctx: QContext, attrs: dict[str, Any]) -> Prepared:
        """This node's frozen integer parameters (empty for ops without a ``prepare``)."""
        if self._prepare is None:
            return Prepared()
        return Prepared(self._prepare(ctx, **attrs))

    def run_eval(self, params: Prepared, inputs: Sequence[Any], attrs: dict[str, Any]) -> tuple[Any, ...]:
        """The integer ``Eval`` on already prepared parameters (numpy or jax arrays)."""
        if self._eval is None:
            raise NotImplementedError(f"op {self.name} has no integer eval")
        out = self._eval(params, *self._pad_inputs(inputs), **attrs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def bind_eval(self, params: Prepared, consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Callable:
        """``run_eval`` for one node with its constant inputs bound: the op's ``bind`` kernel, else ``eval``.

        The result takes the node's inputs and returns an array or a tuple of arrays.
        """
        kernel = None if self._bind is None else self._bind(params, tuple(self._pad_inputs(consts)), **attrs)
        if kernel is None:
            return lambda *inputs: self.run_eval(params, inputs, attrs)
        absent = (None,) * (len(self._pad_inputs(consts)) - len(consts))  # optional inputs the node leaves out
        if not absent:
            return kernel
        return lambda *inputs: kernel(*inputs, *absent)

    def run_int_reference(
        self,
        ctx: QContext,
        inputs: Sequence[np.ndarray | None],
        attrs: dict[str, Any],
        params: Prepared | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Integer semantics of one node: ``eval(prepare(ctx))``, or ``params`` prepared earlier."""
        if params is None:
            params = self.prepare_node(ctx, attrs)
        return self.run_eval(params, inputs, attrs)

    def count_macs(self, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType], attrs: dict) -> int:
        if self._macs is None:
            return 0
        return int(self._macs(list(self._pad_inputs(in_types)), list(out_types), **attrs))


# Built-in ops are declared at import; ops of other packages load from the rlx_edge.ops entry
# points the first time the table misses a name or is walked whole (ops/_plugins.py).
REGISTRY: OpRegistry = OpRegistry()


def defop(
    name: str,
    *,
    family: str,
    inputs: tuple[str, ...],
    attrs: dict[str, Attr] | None = None,
    num_outputs: int | Callable[[dict], int] = 1,
    stage: str = "mir",
    inplace: bool = False,
    typed: bool = False,
    view: bool = False,
    passthrough_quant: bool = False,
    shared_quant: bool = False,
    int_dtypes: tuple[str | DType, ...] = ("i8", "i16"),
    differentiable: bool = True,
    elementwise: bool = False,
    surrogate_grad: bool = False,
    doc: str = "",
) -> OpDef:
    """Declare an op. Declaring the same name twice is a programming error."""
    if REGISTRY.declared(name):
        raise RuntimeError(f"op {name!r} is declared twice ({REGISTRY[name].family} and {family})")
    op = OpDef(
        name=name,
        family=family,
        inputs=inputs,
        attrs=dict(attrs or {}),
        num_outputs=num_outputs,
        stage=stage,
        inplace=inplace,
        typed=typed,
        view=view,
        passthrough_quant=passthrough_quant or view,  # a view's bytes are its input's: nothing can rescale
        shared_quant=shared_quant,
        int_dtypes=tuple(as_dtype(d) for d in int_dtypes),
        differentiable=differentiable,
        elementwise=elementwise,
        surrogate_grad=surrogate_grad,
        doc=doc,
    )
    REGISTRY[name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise OpError(f"unknown op {name!r} (an op of another package loads from {GROUP} entry points)") from None


def prod(xs: Sequence[int]) -> int:
    return math.prod(xs)
