"""Quantization-aware training: the fake_quant op and its straight-through gradient, a short QAT run, the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.autodiff import grad, jvp
from rlx_edge.cli import main
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.models.digits import build_digits_cnn, digits_data
from rlx_edge.quant.ptq import quantize_weights_at
from rlx_edge.quant.qat import qat, weight_scale
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference import run


# fake_quant ---------------------------------------------------------------------------------------
def _fq_graph(x: np.ndarray, scale: np.ndarray, **attrs) -> Graph:
    g = Graph("fq")
    xi = g.input("x", x.shape, "f32")
    s = g.param("s", scale)
    y = g.fake_quant(xi, s, **attrs)
    # a weighted sum, so each element's gradient is its weight times the STE gate
    g.output(g.sum(g.mul(y, g.param("c", np.arange(1, x.size + 1, dtype=np.float32).reshape(x.shape))),
                   axes=tuple(range(x.ndim)), keepdims=True, name="loss"))  # fmt: skip
    return g


def test_ste_gradient_is_gated_by_the_range():
    # per channel along axis 1, int4 range [-8, 7], zero points -1 and 2: the gradient passes where
    # round(x / s) + zp lies in [-8, 7] before the clamp, i.e. half a step past the range's ends
    s = np.array([0.5, 0.25], np.float32)
    zp = (-1, 2)
    u = np.array([[0.0, 0.0], [8.4, 5.4], [8.6, 5.6], [-7.4, -10.4], [-7.6, -10.6], [100.0, -100.0]])  # x / s
    gate = np.array([[1, 1], [1, 1], [0, 0], [1, 1], [0, 0], [0, 0]], np.float32)
    x = (u * s).astype(np.float32)
    g = _fq_graph(x, s, zero_point=zp, qmin=-8, qmax=7, axis=1)
    # the forward pass clamps exactly where the gate closes
    y = run(g, {"x": x}, trace=True)[1]
    fq = next(v for k, v in y.items() if k.startswith("fake_quant"))
    v = np.round(fq / s) + np.array(zp)
    assert np.array_equal(v[gate == 1], (np.round(u) + np.array(zp))[gate == 1])
    assert set(v[gate == 0]) <= {-8.0, 7.0}
    c = np.arange(1, x.size + 1, dtype=np.float32).reshape(x.shape)
    got = run(grad(g, loss="loss", wrt=["x"]), {"x": x})["grad/x"]
    assert np.array_equal(got, c * gate)
    # forward mode gates the tangent the same way
    fwd = run(jvp(g, wrt=["x"]), {"x": x, "tangent/x": np.ones_like(x)})
    assert float(fwd["tangent/loss"].reshape(())) == pytest.approx(float((c * gate).sum()))


def test_fake_quant_rounds_as_ptq_quantizes_weights():
    # trained weights fake-quantized at the min-max scales give PTQ's integers, ties included
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 3, 3, 4)).astype(np.float32)
    for qmax in (7, 127):
        s = np.asarray(weight_scale(w, 0, qmax))
        w[:, 0, 0, 0] = 2.5 * s  # exact ties round away from zero
        w[:, 0, 0, 1] = -3.5 * s
        s = np.asarray(weight_scale(w, 0, qmax))
        y = get_op("fake_quant").run_reference([w, s], {"zero_point": (0,), "qmin": -qmax, "qmax": qmax, "axis": 0})[0]
        q = quantize_weights_at(w, 0, qmax, s)
        assert np.array_equal(y, (q * s[:, None, None, None]).astype(np.float32))
        assert np.array_equal(np.round(y / s[:, None, None, None]), q)


# a short training run -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    x, y = digits_data("train")
    return x[:128], y[:128]


@pytest.fixture(scope="module")
def short_qat(digits):
    x, y = digits
    return qat(build_digits_cnn(), x, y, scheme="int4w", epochs=2, lr=1e-3, batch=32, progress=False)


def test_short_qat_lowers_the_loss(short_qat):
    res = short_qat
    # the fake-quantized model's loss on the training samples, before and after 8 Adam steps
    assert res.loss_after < 0.8 * res.loss_before, (res.loss_before, res.loss_after)
    assert len(res.history) == 2 and res.graph.metadata["qat"]["epochs"] == 2
    # PTQ of the trained weights gave the integers the last step rounded to
    assert res.weights_exact
    trained = res.float_graph.params["conv2.w"]
    assert not np.array_equal(trained, build_digits_cnn().params["conv2.w"])


def test_short_qat_is_the_integer_model_ptq_makes(short_qat):
    """Same nodes, types and activation parameters as PTQ with the same scheme and data: only weights differ."""
    q, p = short_qat.graph, short_qat.ptq_graph
    assert [(n.op, n.attrs) for n in q.nodes] == [(n.op, n.attrs) for n in p.nodes]
    assert q.types.keys() == p.types.keys()
    changed = set()
    for v, t in q.types.items():
        u = p.types[v]
        assert t.dtype == u.dtype and t.shape == u.shape, v
        if v in q.params:
            changed |= {v} if not np.array_equal(q.params[v], p.params[v]) else set()
        else:  # activations: the calibration ranges, not recalibrated
            assert t.quant == u.quant, v
    assert {"conv1.w/quant", "conv2.w/quant", "fc.w/quant"} <= changed
    assert q.types["conv2.w/quant"].dtype.value == "i4"


def test_short_qat_is_bit_exact_on_cortexm_host(short_qat, tmp_path):
    from rlx_edge.ir.ops.quant import affine_quantize
    from rlx_edge.targets.reference.compare import make_inputs

    q = short_qat.graph
    name = q.inputs[0]
    t = q.types[name]
    images = digits_data("test")[0][:20]
    samples = [{name: affine_quantize(im[None], t.quant, t.dtype)} for im in images] + make_inputs(q, 5, seed=1)
    model = compile_host(q, tmp_path)
    outs = [model.run(s)[q.outputs[0]] for s in samples]
    refs = [run(q, s)[q.outputs[0]] for s in samples]
    assert all(np.array_equal(o, r) for o, r in zip(outs, refs))
    assert len({r.tobytes() for r in refs}) > 5  # real answers, not a constant


# the command line ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits_npz(digits, tmp_path_factory):
    path = tmp_path_factory.mktemp("qat") / "d.npz"
    x, y = digits
    np.savez(path, image=x[:64], y=y[:64])
    return path


def test_cli_qat_writes_an_integer_model(digits_npz, tmp_path, capsys):
    import json

    from rlx_edge.ir.serialize import load
    from rlx_edge.models.digits import WEIGHTS_FILE

    out = tmp_path / "q.rlx"
    argv = ["qat", str(WEIGHTS_FILE), "--data", str(digits_npz), "--labels-key", "y", "-o", str(out)]
    code = main([*argv, "--epochs", "1", "--val-split", "0.25", "--json"])
    got = capsys.readouterr()
    assert code == 0, got.err
    summary = json.loads(got.out)  # exactly one JSON object
    assert summary["val_samples"] == 16 and set(summary["val_accuracy"]) == {"float", "ptq", "qat"}
    assert summary["weights_exact"] and summary["epochs"] == 1
    q = load(out)
    assert q.metadata["quantization"]["scheme"] == "int8" and q.metadata["qat"]["val_samples"] == 16
    assert q.types[q.inputs[0]].dtype.value == "i8"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("data", "not a .npy or .npz file"),
        ("key", "no array 'labels'"),
        ("device", "jax sees no gpu device"),
    ],
)
def test_cli_qat_user_errors_are_one_line(bad, message, digits_npz, tmp_path, capsys, monkeypatch):
    from rlx_edge.models.digits import WEIGHTS_FILE

    data, key, device = str(digits_npz), "y", "cpu"
    if bad == "data":
        data = str(tmp_path / "d.txt")
        (tmp_path / "d.txt").write_text("1 2 3\n")
    elif bad == "key":
        key = "labels"
    else:
        import jax

        real = jax.devices
        monkeypatch.setattr(jax, "devices", lambda *a: [] if a == ("gpu",) else real(*a))  # a machine without GPU
        device = "gpu"
    out = tmp_path / "q.rlx"
    argv = ["qat", str(WEIGHTS_FILE), "--data", data, "--labels-key", key, "--device", device, "-o", str(out)]
    assert main([*argv, "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlx-edge: error: ") and message in err, err
    assert not out.exists()


def test_short_qat_exports_bit_exact_with_tflite_micro(short_qat, tmp_path):
    from rlx_edge.frontends.tflite import export_tflite, load_tflite
    from rlx_edge.targets.reference.compare import compare_with_tflm, make_inputs

    q = short_qat.graph  # int4 weights: TFLite's INT4 tensors
    path = tmp_path / "qat_int4w.tflite"
    export_tflite(q, path)
    result = compare_with_tflm(path, 10, seed=2)
    assert result.ok and result.inputs == 10, result
    # and the exported file computes what the QAT graph computes
    back = load_tflite(path)
    for s in make_inputs(q, 5, seed=3):
        assert np.array_equal(run(back, {back.inputs[0]: s[q.inputs[0]]})[back.outputs[0]], run(q, s)[q.outputs[0]])
