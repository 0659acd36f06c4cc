"""One nn.TransformerEncoderLayer as PyTorch's ONNX exporter writes it, imported, quantized, run on QEMU (#19).

The graphs are built here with ``onnx.helper`` node for node as torch's TorchScript exporter
(``torch.onnx.export``, ``dynamo=False``) writes a batch-first ``TransformerEncoderLayer``
(``norm_first=False``, ``activation="gelu"``) called with ``src_key_padding_mask``:

* ``nn.MultiheadAttention`` moves batch-first input to sequence-first (Transpose), projects with
  the packed in-projection (MatMul + Add), splits q, k and v with ``unflatten(-1, (3, E))
  .unsqueeze(0).transpose(0, -2).squeeze(-2)`` and indexes them (Reshape, Unsqueeze, Transpose,
  Squeeze, Gather), and views each as ``[B*H, L, Dh]`` then ``[B, H, L, Dh]`` (Reshape,
  Transpose; the shapes come from Shape / Gather / Unsqueeze / Concat chains).
* ``F._canonical_mask`` turns the boolean padding mask into a float one,
  ``zeros_like(mask).masked_fill(mask, -inf)`` (ConstantOfShape, Where), which is viewed
  ``[B, 1, 1, L]``, expanded over the heads and reshaped (Reshape, Expand, Reshape).
* ``need_weights=False`` takes ``scaled_dot_product_attention``, whose opset-14 symbolic
  transposes k, multiplies q and kᵀ each by ``sqrt(1 / sqrt(Dh))`` (Shape, Slice, Cast, Sqrt,
  Div), multiplies them (MatMul with batch dims), adds the float mask, applies Softmax and
  multiplies by v.
* The output projection is a Gemm on ``[L*B, E]``; then residual Add, LayerNormalization,
  the feed-forward MatMul + Add, GELU as torch writes it below opset 20
  (``x * (Erf(x / sqrt 2) + 1) * 0.5``), MatMul + Add, residual Add, LayerNormalization.

The second graph is what older exporters (opset 14) write with a causal mask as well: layer
norm decomposed (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), the causal mask
from Trilu over an Expand of ones (SDPA's ``is_causal`` symbolic), combined with the padding
mask and applied as ``Where(mask, -inf, scores)``, and a learned position embedding indexed
by Range.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlx_edge.cli import main
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.serialize import load
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.runners import prepare
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_target

B, L, E, H, FF = 2, 8, 16, 2, 32
DH = E // H
_F = TensorProto.FLOAT
_I64 = TensorProto.INT64


class _Builder:
    """Nodes and initializers of one graph, named as torch names them (``/self_attn/MatMul``)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def op(self, op: str, inputs: list[str], scope: str = "", n_out: int = 1, **attrs) -> str:
        self._n += 1
        name = f"{scope}/{op}_{self._n}"
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0]

    def const(self, value, dtype=np.float32, scope: str = "") -> str:
        """A Constant node, as torch writes scalars and shapes."""
        arr = np.asarray(value, dtype=dtype)
        return self.op("Constant", [], scope, value=numpy_helper.from_array(arr))

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def weight(self, name: str, shape: tuple[int, ...], scale: float) -> str:
        return self.init(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def shape_dim(self, x: str, i: int, scope: str) -> str:
        """``x.size(i)`` as a 1-element int64 tensor: Shape, Gather, Unsqueeze (torch's view shapes)."""
        s = self.op("Shape", [x], scope)
        d = self.op("Gather", [s, self.const(i, np.int64, scope)], scope, axis=0)
        return self.op("Unsqueeze", [d, self.const([0], np.int64, scope)], scope)

    def linear(self, x: str, w: str, b: str, scope: str) -> str:
        """torch's linear on a 3-D input: MatMul by the transposed weight, Add of the bias."""
        return self.op("Add", [b, self.op("MatMul", [x, w], scope)], scope)


def _layer_norm(bd: _Builder, x: str, gamma: str, beta: str, scope: str, decomposed: bool) -> str:
    if not decomposed:
        return bd.op("LayerNormalization", [x, gamma, beta], scope, axis=-1, epsilon=1e-5)
    # torch's layer_norm symbolic below opset 17
    axes = {"axes": [-1]}
    mean = bd.op("ReduceMean", [x], scope, **axes)
    d = bd.op("Sub", [x, mean], scope)
    var = bd.op("ReduceMean", [bd.op("Pow", [d, bd.const(2.0, scope=scope)], scope)], scope, **axes)
    std = bd.op("Sqrt", [bd.op("Add", [var, bd.const(1e-5, scope=scope)], scope)], scope)
    y = bd.op("Div", [d, std], scope)
    return bd.op("Add", [bd.op("Mul", [y, gamma], scope), beta], scope)


def _gelu(bd: _Builder, x: str, scope: str) -> str:
    """torch's gelu symbolic (opset < 20): x * (erf(x / sqrt 2) + 1) * 0.5."""
    erf = bd.op("Erf", [bd.op("Div", [x, bd.const(math.sqrt(2.0), scope=scope)], scope)], scope)
    y = bd.op("Mul", [x, bd.op("Add", [erf, bd.const(1.0, scope=scope)], scope)], scope)
    return bd.op("Mul", [y, bd.const(0.5, scope=scope)], scope)


def encoder_layer(*, causal: bool, seed: int = 0) -> onnx.ModelProto:
    """One TransformerEncoderLayer(d_model=E, nhead=H, dim_feedforward=FF, activation='gelu', batch_first=True).

    ``causal=False``: opset 17, LayerNormalization, the padding mask added as a float mask.
    ``causal=True``: opset 14, decomposed layer norm, padding and causal masks applied with Where,
    and a learned position embedding read with Range + Gather.
    """
    bd = _Builder(np.random.default_rng(seed))
    sa = "/self_attn"
    w_in = bd.weight("self_attn.in_proj_weight_T", (E, 3 * E), 1 / math.sqrt(E))
    b_in = bd.weight("self_attn.in_proj_bias", (3 * E,), 0.1)
    w_out = bd.weight("self_attn.out_proj.weight", (E, E), 1 / math.sqrt(E))
    b_out = bd.weight("self_attn.out_proj.bias", (E,), 0.1)
    w1 = bd.weight("linear1.weight_T", (E, FF), 1 / math.sqrt(E))
    b1 = bd.weight("linear1.bias", (FF,), 0.1)
    w2 = bd.weight("linear2.weight_T", (FF, E), 1 / math.sqrt(FF))
    b2 = bd.weight("linear2.bias", (E,), 0.1)
    g1 = bd.init("norm1.weight", (1 + 0.1 * bd.rng.standard_normal(E)).astype(np.float32))
    be1 = bd.weight("norm1.bias", (E,), 0.1)
    g2 = bd.init("norm2.weight", (1 + 0.1 * bd.rng.standard_normal(E)).astype(np.float32))
    be2 = bd.weight("norm2.bias", (E,), 0.1)

    src = "src"
    if causal:
        # positions = arange(L) from the input's shape; x + pos_embedding(positions)
        table = bd.weight("pos_embedding.weight", (L, E), 0.5)
        seq = bd.op("Squeeze", [bd.shape_dim(src, 1, "/pos"), bd.const([0], np.int64, "/pos")], "/pos")
        pos = bd.op("Range", [bd.const(0, np.int64, "/pos"), seq, bd.const(1, np.int64, "/pos")], "/pos")
        src = bd.op("Add", [src, bd.op("Gather", [table, pos], "/pos", axis=0)], "/pos")

    # nn.MultiheadAttention(batch_first=True): query = key = value = src.transpose(1, 0)
    x = bd.op("Transpose", [src], sa, perm=[1, 0, 2])
    proj = bd.linear(x, w_in, b_in, sa)
    # proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    shp = bd.op(
        "Concat",
        [bd.shape_dim(proj, 0, sa), bd.shape_dim(proj, 1, sa), bd.const([3, E], np.int64, sa)],
        sa,
        axis=0,
    )
    proj = bd.op("Reshape", [proj, shp], sa)
    proj = bd.op("Unsqueeze", [proj, bd.const([0], np.int64, sa)], sa)
    proj = bd.op("Transpose", [proj], sa, perm=[3, 1, 2, 0, 4])
    proj = bd.op("Squeeze", [proj, bd.const([-2], np.int64, sa)], sa)
    q, k, v = (bd.op("Gather", [proj, bd.const(i, np.int64, sa)], sa, axis=0) for i in range(3))

    # F._canonical_mask(key_padding_mask): zeros_like(mask, float).masked_fill_(mask, -inf)
    kpm = "src_key_padding_mask"
    zeros = bd.op(
        "ConstantOfShape", [bd.op("Shape", [kpm], sa)], sa, value=numpy_helper.from_array(np.zeros(1, np.float32))
    )
    fmask = bd.op("Where", [kpm, bd.const(-np.inf, scope=sa), zeros], sa)
    # key_padding_mask.view(B, 1, 1, L).expand(-1, H, -1, -1).reshape(B * H, 1, L)
    fmask = bd.op("Reshape", [fmask, bd.const([B, 1, 1, L], np.int64, sa)], sa)
    fmask = bd.op("Expand", [fmask, bd.const([1, H, 1, 1], np.int64, sa)], sa)
    fmask = bd.op("Reshape", [fmask, bd.const([B * H, 1, L], np.int64, sa)], sa)
    # attn_mask.view(B, H, -1, L) for scaled_dot_product_attention
    fmask = bd.op("Reshape", [fmask, bd.const([B, H, -1, L], np.int64, sa)], sa)

    # q.view(L, B * H, Dh).transpose(0, 1), then .view(B, H, L, Dh)
    def heads(t: str) -> str:
        t = bd.op("Reshape", [t, bd.const([L, B * H, DH], np.int64, sa)], sa)
        t = bd.op("Transpose", [t], sa, perm=[1, 0, 2])
        return bd.op("Reshape", [t, bd.const([B, H, L, DH], np.int64, sa)], sa)

    q, k, v = heads(q), heads(k), heads(v)

    # scaled_dot_product_attention (opset 14 symbolic): the scale from q's shape, applied to q and kᵀ
    last = bd.op(
        "Slice", [bd.op("Shape", [q], sa), bd.const([-1], np.int64, sa), bd.const([2**63 - 1], np.int64, sa)], sa
    )
    scale = bd.op("Div", [bd.const([1.0], scope=sa), bd.op("Sqrt", [bd.op("Cast", [last], sa, to=_F)], sa)], sa)
    root = bd.op("Sqrt", [scale], sa)
    kt = bd.op("Transpose", [k], sa, perm=[0, 1, 3, 2])
    scores = bd.op("MatMul", [bd.op("Mul", [q, root], sa), bd.op("Mul", [kt, root], sa)], sa)
    if causal:
        # SDPA's causal mask: Trilu(ones(L, S)) == 0 is the part above the diagonal
        size = bd.op("Concat", [bd.shape_dim(q, 2, sa), bd.shape_dim(k, 2, sa)], sa, axis=0)
        ones = bd.op("Expand", [bd.const([1.0], scope=sa), size], sa)
        above = bd.op("Equal", [bd.op("Trilu", [ones], sa, upper=0), bd.const([0.0], scope=sa)], sa)
        pad = bd.op("Reshape", [kpm, bd.const([B, 1, 1, L], np.int64, sa)], sa)
        hidden = bd.op("Or", [pad, above], sa)
        scores = bd.op("Where", [hidden, bd.const(-np.inf, scope=sa), scores], sa)
    else:
        scores = bd.op("Add", [scores, fmask], sa)
    attn = bd.op("Softmax", [scores], sa, axis=-1)
    out = bd.op("MatMul", [attn, v], sa)
    # attn_output.permute(2, 0, 1, 3).contiguous().view(L * B, E); out_proj; view(L, B, E); transpose(1, 0)
    out = bd.op("Transpose", [out], sa, perm=[2, 0, 1, 3])
    out = bd.op("Reshape", [out, bd.const([L * B, E], np.int64, sa)], sa)
    out = bd.op("Gemm", [out, w_out, b_out], sa, alpha=1.0, beta=1.0, transB=1)
    out = bd.op("Reshape", [out, bd.const([L, B, E], np.int64, sa)], sa)
    out = bd.op("Transpose", [out], sa, perm=[1, 0, 2])

    x = _layer_norm(bd, bd.op("Add", [src, out]), g1, be1, "/norm1", decomposed=causal)
    ff = _gelu(bd, bd.linear(x, w1, b1, "/linear1"), "/activation")
    ff = bd.linear(ff, w2, b2, "/linear2")
    y = _layer_norm(bd, bd.op("Add", [x, ff]), g2, be2, "/norm2", decomposed=causal)
    bd.nodes.append(helper.make_node("Identity", [y], ["output"], name="/Identity"))

    inputs = [
        helper.make_tensor_value_info("src", _F, [B, L, E]),
        helper.make_tensor_value_info(kpm, TensorProto.BOOL, [B, L]),
    ]
    outputs = [helper.make_tensor_value_info("output", _F, [B, L, E])]
    graph = helper.make_graph(bd.nodes, "main_graph", inputs, outputs, initializer=bd.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14 if causal else 17)])
    model.producer_name = "pytorch"
    onnx.checker.check_model(model, full_check=True)
    return model


def _inputs(seed: int, n: int = 1) -> list[dict[str, np.ndarray]]:
    """Random src and a padding mask that leaves each sequence at least its first token."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        src = rng.standard_normal((B, L, E)).astype(np.float32)
        lengths = rng.integers(1, L + 1, B)
        mask = np.arange(L)[None, :] >= lengths[:, None]
        out.append({"src": src, "src_key_padding_mask": mask})
    return out


def _save(model: onnx.ModelProto, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _reference(g: Graph, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return run(g, [feeds[n] for n in g.inputs])[g.outputs[0]]


@pytest.mark.parametrize("causal", [False, True], ids=["padding_opset17", "causal_opset14"])
def test_float_matches_onnxruntime(causal: bool, tmp_path: Path) -> None:
    path = _save(encoder_layer(causal=causal), tmp_path, "layer")
    g = load_onnx(path)
    ops = [n.op for n in g.nodes]
    # the decompositions came back as the ops they stand for, and the masks as softmax's bool mask
    assert ops.count("layer_norm") == 2 and ops.count("gelu") == 1
    (sm,) = (n for n in g.nodes if n.op == "softmax")
    assert len(sm.inputs) == 2 and g.types[sm.inputs[1]].dtype == DType.bool
    assert not any(np.isinf(p).any() for p in g.params.values() if p.dtype.kind == "f")
    assert "matmul" in ops  # Q·Kᵀ and attention·V: batched over [B, H]
    for feeds in _inputs(3, 4):
        want = _ort(path, feeds)
        got = _reference(g, feeds)
        # float32 throughout, summed in another order than onnxruntime's (matmuls, means, softmax
        # sums): relative to the outputs' scale (they are layer-normed, O(1))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def test_calibration_sees_no_infinity(tmp_path: Path) -> None:
    g = load_onnx(_save(encoder_layer(causal=True), tmp_path, "layer"))
    rec = calibrate(g, _stacked(_inputs(5, 8)))
    assert rec.ranges and all(np.isfinite(r.lo).all() and np.isfinite(r.hi).all() for r in rec.ranges.values())


def _stacked(samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([s[k] for s in samples]) for k in samples[0]}


def _quantized_feed(q: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A float sample in the int8 model's interface: src quantized with the input's parameters."""
    qp = q.types["src"].quant
    x = np.round(feeds["src"] / float(qp.scale[0])) + int(qp.zero_point[0])
    return {"src": np.clip(x, -128, 127).astype(np.int8), "src_key_padding_mask": feeds["src_key_padding_mask"]}


def test_quantized_bit_exact_on_qemu_m4(tmp_path: Path) -> None:
    """``rlx-edge quantize`` with seeded calibration data, then the M4 firmware under QEMU."""
    path = _save(encoder_layer(causal=False), tmp_path, "layer")
    data = tmp_path / "calib.npz"
    np.savez(data, **_stacked(_inputs(5, 32)))
    out = tmp_path / "layer_int8.rlx"
    assert main(["quantize", str(path), "--data", str(data), "-o", str(out)]) == 0
    q = load(out)
    ops = {n.op for n in q.nodes}
    assert {"layer_norm", "gelu", "softmax", "matmul"} <= ops
    assert all(q.types[o].dtype in (DType.i8, DType.bool) for n in q.nodes for o in n.outputs)
    runner = prepare("qemu-m4", q, tmp_path / "fw")
    for feeds in _inputs(11, 4):
        feed = _quantized_feed(q, feeds)
        want = run(q, feed)[q.outputs[0]]
        assert np.array_equal(runner(feed)[q.outputs[0]], want)
    # and on random integer inputs with the storage limits (masks with rows of no kept key among them)
    r = compare_with_target(q, runner, n_inputs=2, seed=1, atol=0, rtol=0)
    assert r.inputs == 2 and r.mismatches == 0, r.first_mismatch


def test_causal_quantized_bit_exact_on_cortexm_host(tmp_path: Path) -> None:
    """The opset-14 form (decomposed norms, Where masks combined with Or) through the host build of the same C."""
    g = load_onnx(_save(encoder_layer(causal=True), tmp_path, "layer"))
    q = quantize(g, calibrate(g, _stacked(_inputs(5, 32))))
    assert {"logical_or", "logical_not"} <= {n.op for n in q.nodes}
    runner = prepare("cortexm-host", q, tmp_path / "host")
    for feeds in _inputs(12, 4):
        feed = _quantized_feed(q, feeds)
        assert np.array_equal(runner(feed)[q.outputs[0]], run(q, feed)[q.outputs[0]])
