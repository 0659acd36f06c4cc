"""compile_jax / JaxModel / run_jax / eval_dataset: batching, devices, sharding, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from modelfiles import MLPERF as MODELS
from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.jax import RULES, compile_jax, eval_dataset, run_jax
from rlx_edge.targets.jax._lazy import JAX_MISSING
from rlx_edge.targets.reference import run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _mlp(batch) -> Graph:
    g = Graph("mlp")
    x = g.input("x", (batch, 4), "f32")
    w = g.param("w", np.arange(12, dtype=np.float32).reshape(3, 4) / 10)
    y = g.fully_connected(x, w, activation="relu")
    g.output(g.softmax(y))
    return g


def test_symbolic_batch_runs_natively() -> None:
    g = _mlp("N")
    model = compile_jax(g)
    assert model.batch_mode == "native"
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    got = model(x)[g.outputs[0]]
    np.testing.assert_allclose(got, run(g, x)[g.outputs[0]], rtol=1e-6, atol=1e-6)


def test_batch_one_is_replaced_and_static_shapes_get_an_extra_axis() -> None:
    g1 = _mlp(1)
    m1 = compile_jax(g1)
    assert m1.batch_mode == "replace"
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    want = np.concatenate([run(g1, x[i : i + 1])[g1.outputs[0]] for i in range(6)])
    np.testing.assert_allclose(m1(x)[g1.outputs[0]], want, rtol=1e-6, atol=1e-6)
    g2 = _mlp(2)
    m2 = compile_jax(g2)
    assert m2.batch_mode == "exact"
    xs = x.reshape(3, 2, 4)
    assert m2(xs[0])[g2.outputs[0]].shape == (2, 3)  # the graph's own shape: one call
    batched = m2(xs)[g2.outputs[0]]
    assert batched.shape == (3, 2, 3)
    for i in range(3):
        np.testing.assert_allclose(batched[i], run(g2, xs[i])[g2.outputs[0]], rtol=1e-6, atol=1e-6)


def test_input_errors_are_clear() -> None:
    model = compile_jax(_mlp(1))
    with pytest.raises(RlxError, match="must be f32"):
        model(np.zeros((2, 4), np.int8))
    with pytest.raises(RlxError, match=r"must have shape \[1,4\] \(any leading batch size\), got \[2, 5\]"):
        model(np.zeros((2, 5), np.float32))
    with pytest.raises(RlxError, match="does not fit"):
        compile_jax(_mlp(2), batch="replace")


def test_unsupported_op_names_the_node() -> None:
    g = Graph("g")
    g.output(g.relu(g.input("x", (1, 3), "f32"), name="the_relu"))
    with RULES.replaced("relu", None), pytest.raises(UnsupportedOpError, match=r"the_relu.*relu"):
        compile_jax(g)


def test_quantized_op_without_integer_semantics_is_an_error() -> None:
    g = Graph("g")
    x = g.input("x", (1, 3), "i8", quant=QuantParams(0.1, 0))
    g.output(g.erf(x, name="qerf", out_quant=QuantParams(0.1, 0)))
    with pytest.raises(UnsupportedOpError, match=r"node 'qerf' \(erf\).*quantized erf"):
        compile_jax(g)


def test_missing_jax_is_a_user_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(RlxError, match=r"needs jax: pip install 'rlx-edge\[jax\]'") as e:
        compile_jax(_mlp(1))
    assert str(e.value) == JAX_MISSING


def test_device_selection() -> None:
    assert compile_jax(_mlp(1), "cpu:0").platform == "cpu"
    with pytest.raises(RlxError, match="no tpu device"):
        compile_jax(_mlp(1), "tpu")
    with pytest.raises(RlxError, match="does not exist"):
        compile_jax(_mlp(1), "cpu:99")
    with pytest.raises(RlxError, match="unknown jax device"):
        compile_jax(_mlp(1), "abacus")


def test_eval_dataset_on_jax_and_reference(tmp_path) -> None:
    g = load_tflite(MODELS / "kws_ref_model.tflite")
    f = load_tflite(MODELS / "kws_ref_model_float32.tflite")
    rng = np.random.default_rng(3)
    data = rng.standard_normal((12, 49, 10, 1)).astype(np.float32) * 20
    labels = rng.integers(0, 12, 12)
    np.savez(tmp_path / "d.npz", data=data, labels=labels)
    res = {
        t: eval_dataset(g, tmp_path / "d.npz", True, target=t, batch_size=5, progress=False, float_graph=f)
        for t in ("jax", "reference")
    }
    for r in res.values():
        assert r["count"] == 12 and 0 <= r["accuracy"] <= 1 and 0 <= r["agreement"] <= 1
    # the integer model is bit-exact on jax, so every statistic agrees with the oracle's
    assert res["jax"]["accuracy"] == res["reference"]["accuracy"]
    assert res["jax"]["agreement"] == res["reference"]["agreement"]
    ref_classes = np.array([run(g, _q(g, data[i : i + 1]))[g.outputs[0]].argmax() for i in range(12)])
    assert res["jax"]["accuracy"] == float(np.mean(ref_classes == labels))
    with pytest.raises(RlxError, match="labels for"):
        eval_dataset(g, data, labels[:3], progress=False)
    with pytest.raises(RlxError, match="unknown evaluation target"):
        eval_dataset(g, data, target="fpga", progress=False)


def _q(g: Graph, x: np.ndarray) -> np.ndarray:
    from rlx_edge.ir.ops.quant import affine_quantize

    t = g.types[g.inputs[0]]
    return affine_quantize(x, t.quant, t.dtype)


def test_run_jax() -> None:
    g = _mlp("N")
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(run_jax(g, x, "cpu")[g.outputs[0]], run(g, x)[g.outputs[0]], rtol=1e-6)


def test_sharded_over_two_cpu_devices() -> None:
    # jax fixes the host device count at start-up, so this runs in a fresh interpreter
    script = textwrap.dedent(
        f"""
        import json, numpy as np
        from rlx_edge.frontends.tflite import load_tflite
        from rlx_edge.targets.jax import compile_jax
        g = load_tflite({str(MODELS / "ad01_int8.tflite")!r})
        x = np.random.default_rng(0).integers(-128, 128, (7, 640)).astype(np.int8)
        sharded = compile_jax(g, "cpu", shard=True)
        arrays, _, _ = sharded.prepare(x[:6])
        out = sharded.run_device(sharded.put(arrays))[0]
        print(json.dumps({{
            "devices": len(sharded.devices),
            "spread": len(out.sharding.device_set),
            "equal": bool(np.array_equal(sharded(x)[g.outputs[0]], compile_jax(g)(x)[g.outputs[0]])),
        }}))
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"devices": 2, "spread": 2, "equal": True}
