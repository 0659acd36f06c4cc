"""Attention HIR blocks: ``attention`` (one head, a mask kind) and ``multi_head_attention`` over it.

``attention`` lowers to MIR as transpose(k) -> matmul -> mul(scale) ->
softmax(axis=-1, mask) -> matmul, with the causal and sliding-window masks a
constant bool parameter and a custom mask the block's own input, so its
integer form is batch matmul, TFLite Micro's softmax restricted to the kept
positions (``reduce.softmax``'s mask) and batch matmul: no kernel of its own.
``multi_head_attention`` projects x with four fully connected layers (weights
[E, E] as ``fully_connected``: y = x @ w.T + b), splits E into heads, runs
``attention`` and merges the heads.

The lowering is written once against a small builder interface, and type
inference and the float reference run that same function over types and
arrays, so a block's reference is its lowered graph's reference by
construction (``tests/ir/ops/test_attention.py`` checks it).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, fail, rand_float
from rlx_edge.ir.ops._registry import Attr, defop, get_op
from rlx_edge.ir.shape import static_dim
from rlx_edge.ir.types import TensorType

MASK_KINDS = ("none", "causal", "sliding_window", "custom")


class _Builder(Protocol):
    """What a lowering calls: one MIR (or HIR) op, or a constant, on graph tensors, types or arrays."""

    def op(self, name: str, *inputs: Any, **attrs: Any) -> Any: ...

    def const(self, name: str, value: np.ndarray) -> Any: ...


class _GraphBuilder:
    def __init__(self, g: Any) -> None:
        self.g = g

    def op(self, name: str, *inputs: Any, **attrs: Any) -> Any:
        return getattr(self.g, name)(*inputs, **attrs)

    def const(self, name: str, value: np.ndarray) -> Any:
        return self.g.param(name, value)


class _TypeBuilder:
    def op(self, name: str, *inputs: Any, **attrs: Any) -> TensorType:
        opdef = get_op(name)
        return opdef.run_infer(list(inputs), opdef.normalize_attrs(attrs))[0]

    def const(self, name: str, value: np.ndarray) -> TensorType:
        return TensorType(value.shape, from_numpy(value.dtype))


class _ArrayBuilder:
    def op(self, name: str, *inputs: Any, **attrs: Any) -> np.ndarray:
        opdef = get_op(name)
        return opdef.run_reference(list(inputs), opdef.normalize_attrs(attrs))[0]

    def const(self, name: str, value: np.ndarray) -> np.ndarray:
        return value


def _shape(v: Any) -> tuple:
    return tuple(v.shape)


def _np_dtype(v: Any) -> np.dtype:
    """The numpy dtype of a graph tensor, a TensorType or an array."""
    t = getattr(v, "type", v)
    return t.dtype.numpy if isinstance(t, TensorType) else np.dtype(v.dtype)


def attention_mask(kind: str, lq: int, lk: int, window: int) -> np.ndarray | None:
    """The [lq, lk] bool mask of a mask kind (True = query i sees key j); None for "none" and "custom".

    Queries are aligned to the keys' end (query i is at position i + lk - lq), so
    a query block continuing a longer key sequence sees the keys before it. Causal:
    key j <= that position; sliding window: also j > position - window. A query
    that sees no key (causal with lq > lk) gets an all-0 softmax row, so a zero output.
    """
    if kind not in ("causal", "sliding_window"):
        return None
    pos = np.arange(lq)[:, None] + (lk - lq)
    j = np.arange(lk)[None, :]
    keep = j <= pos
    if kind == "sliding_window":
        keep &= j > pos - window
    return keep


def _check_attrs(mask_in: Any, kind: str, window: int, where: str) -> None:
    if kind == "custom" and mask_in is None:
        fail(f'{where}: mask="custom" needs the mask input (bool, True = attend)')
    if kind != "custom" and mask_in is not None:
        fail(f'{where}: a mask input needs mask="custom", got mask="{kind}"')
    if kind == "sliding_window" and window < 1:
        fail(f"{where}: sliding_window needs window >= 1 (keys each query sees), got {window}")
    if kind != "sliding_window" and window != 0:
        fail(f'{where}: window={window} applies to mask="sliding_window" only, got mask="{kind}"')


def _attention(b: _Builder, q: Any, k: Any, v: Any, mask: Any, *, mask_kind: str, window: int, scale: float) -> Any:
    # (the mask input is positional everywhere: the attribute of the same name holds the mask kind)
    """The lowering of ``attention``, on any builder."""
    qs, ks, vs = _shape(q), _shape(k), _shape(v)
    for name, s in (("q", qs), ("k", ks), ("v", vs)):
        if len(s) < 2:
            fail(f"attention: {name} needs rank >= 2 ([..., L, D]), got shape {list(s)}")
    _check_attrs(mask, mask_kind, window, "attention")
    if scale == 0:
        scale = 1.0 / math.sqrt(static_dim(qs[-1], "attention head size D"))
    perm = tuple(range(len(ks) - 2)) + (len(ks) - 1, len(ks) - 2)
    scores = b.op("matmul", q, b.op("transpose", k, perm=perm))
    dt = _np_dtype(scores)
    scaled = b.op("mul", scores, b.const("attention_scale", np.asarray(scale, dt)))
    if mask_kind in ("causal", "sliding_window"):
        lq = static_dim(qs[-2], "attention query length")
        lk = static_dim(ks[-2], "attention key length")
        mask = b.const("attention_mask", attention_mask(mask_kind, lq, lk, window))
    probs = b.op("softmax", scaled, mask, axis=-1)
    return b.op("matmul", probs, v)


def _mha(b: _Builder, x: Any, wq, wk, wv, wo, bq, bk, bv, bo, mask: Any, *, num_heads: int, mask_kind: str,
         window: int) -> Any:  # fmt: skip
    """The lowering of ``multi_head_attention``, on any builder."""
    xs = _shape(x)
    if len(xs) != 3:
        fail(f"multi_head_attention: x needs shape [B, L, E], got {list(xs)}")
    batch, length, e = (static_dim(d, "multi_head_attention x") for d in xs)
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)):
        if _shape(w) != (e, e):
            fail(f"multi_head_attention: {name} needs shape [E, E] = [{e}, {e}], got {list(_shape(w))}")
    if num_heads < 1 or e % num_heads:
        fail(f"multi_head_attention: num_heads={num_heads} does not divide the embedding size E={e}")
    dh = e // num_heads

    def heads(w, bias):  # [B, L, E] -> [B, H, L, Dh]
        y = b.op("reshape", b.op("fully_connected", x, w, bias), shape=(batch, length, num_heads, dh))
        return b.op("transpose", y, perm=(0, 2, 1, 3))

    att = b.op("attention", heads(wq, bq), heads(wk, bk), heads(wv, bv), mask, mask=mask_kind, window=window, scale=0.0)
    merged = b.op("reshape", b.op("transpose", att, perm=(0, 2, 1, 3)), shape=(batch, length, e))
    return b.op("fully_connected", merged, wo, bo)


def _pick_float(rng: np.random.Generator):
    return FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]


def _rand_kind(rng: np.random.Generator) -> tuple[str, int]:
    kind = str(rng.choice(MASK_KINDS))
    return kind, int(rng.integers(1, 4)) if kind == "sliding_window" else 0


# attention ----------------------------------------------------------------------------------------
_MASK_ATTRS = {
    "mask": Attr("str", "none", choices=MASK_KINDS, doc="none, causal, sliding_window or custom (the mask input)"),
    "window": Attr("int", 0, doc="sliding_window: each query sees this many keys, itself included"),
}

attention = defop(
    "attention",
    family="attention",
    inputs=("q", "k", "v", "mask?"),
    attrs={**_MASK_ATTRS, "scale": Attr("float", 0.0, doc="scores multiplier; 0 means 1/sqrt(D)")},
    stage="hir",
    doc=(
        "softmax(scale * q @ k^T, masked) @ v over q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]; "
        "mask kinds none, causal, sliding_window (window) or custom (a bool mask input, True = attend)."
    ),
)


def _attn_kw(attrs: dict) -> dict:
    return {"mask_kind": attrs["mask"], "window": attrs["window"], "scale": attrs["scale"]}


@attention.infer
def _attention_infer(*ins, **attrs):
    return _attention(_TypeBuilder(), *ins, **_attn_kw(attrs))


@attention.reference
def _attention_ref(*ins, **attrs):
    return _attention(_ArrayBuilder(), *ins, **_attn_kw(attrs))


@attention.lower
def _attention_lower(g, ins, attrs):
    return [_attention(_GraphBuilder(g), *ins, **_attn_kw(attrs))]


@attention.macs
def _attention_macs(ins, outs, **attrs):
    lk, d = (static_dim(s, "attention k") for s in ins[1].shape[-2:])
    # q @ k^T: Lq * Lk * D per batch entry; probs @ v: Lq * Lk * Dv (the output's size times Lk)
    return math.prod(outs[0].shape[:-1]) * lk * d + math.prod(outs[0].shape) * lk


@attention.sample
def _attention_sample(rng):
    dt = _pick_float(rng)
    lead = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3))))
    lq, lk, d, dv = (int(n) for n in rng.integers(1, 6, 4))
    kind, window = _rand_kind(rng)
    mask = None
    if kind == "custom":
        shape = (lq, lk) if rng.random() < 0.5 else lead + (lq, lk)
        mask = rng.random(shape) < 0.7
    scale = 0.0 if rng.random() < 0.6 else float(rng.choice([0.25, 1.0, 2.0]))
    ins = [
        rand_float(rng, lead + (lq, d), dt),
        rand_float(rng, lead + (lk, d), dt),
        rand_float(rng, lead + (lk, dv), dt),
    ]
    return [*ins, mask], {"mask": kind, "window": window, "scale": scale}


# multi_head_attention -----------------------------------------------------------------------------
multi_head_attention = defop(
    "multi_head_attention",
    family="attention",
    inputs=("x", "wq", "wk", "wv", "wo", "bq?", "bk?", "bv?", "bo?", "mask?"),
    attrs={"num_heads": Attr("int", doc="heads; must divide the embedding size E"), **_MASK_ATTRS},
    stage="hir",
    doc=(
        "Self-attention over x [B, L, E]: q, k, v = x @ w.T + b, split into num_heads heads, attention "
        "(scale 1/sqrt(E / num_heads), the mask kind), heads merged, then @ wo.T + bo."
    ),
)


def _mha_kw(attrs: dict) -> dict:
    return {"num_heads": attrs["num_heads"], "mask_kind": attrs["mask"], "window": attrs["window"]}


@multi_head_attention.infer
def _mha_infer(*ins, **attrs):
    return _mha(_TypeBuilder(), *ins, **_mha_kw(attrs))


@multi_head_attention.reference
def _mha_ref(*ins, **attrs):
    return _mha(_ArrayBuilder(), *ins, **_mha_kw(attrs))


@multi_head_attention.lower
def _mha_lower(g, ins, attrs):
    return [_mha(_GraphBuilder(g), *ins, **_mha_kw(attrs))]


@multi_head_attention.macs
def _mha_macs(ins, outs, **attrs):
    batch, length, e = (static_dim(d, "multi_head_attention x") for d in ins[0].shape)
    # four E x E projections per token, then scores and weighted sums: L * L * (E / H) each per head
    return 4 * batch * length * e * e + 2 * batch * length * length * e


@multi_head_attention.sample
def _mha_sample(rng):
    dt = _pick_float(rng)
    heads = int(rng.integers(1, 4))
    e = heads * int(rng.integers(1, 4))
    batch, length = int(rng.integers(1, 3)), int(rng.integers(1, 6))
    kind, window = _rand_kind(rng)
    mask = rng.random((length, length)) < 0.7 if kind == "custom" else None
    ws = [rand_float(rng, (e, e), dt, scale=1 / math.sqrt(e)) for _ in range(4)]
    bs = [rand_float(rng, (e,), dt) if rng.random() < 0.6 else None for _ in range(4)]
    x = rand_float(rng, (batch, length, e), dt)
    return [x, *ws, *bs, mask], {"num_heads": heads, "mask": kind, "window": window}
