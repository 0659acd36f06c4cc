"""Models with several inputs and outputs through the QEMU runner, bit-exact against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import TFLM
from rlx_edge.cli import main
from rlx_edge.errors import RlxError
from rlx_edge.frontends import load_model
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.serialize import save
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import IoLayout

SIMPLE_ADD = TFLM / "simple_add_model.tflite"


def _run_cli(model, inputs: dict[str, np.ndarray], target: str, tmp_path) -> dict[str, np.ndarray]:
    x = tmp_path / "x.npz"
    np.savez(x, **inputs)
    y = tmp_path / f"y-{target}.npz"
    assert main(["run", str(model), "--input", str(x), "-o", str(y), "--target", target]) == 0
    with np.load(y) as out:
        return {k: out[k] for k in out.files}


def test_simple_add_two_inputs_bit_exact(tmp_path):
    graph = load_model(SIMPLE_ADD)
    a, b = graph.inputs
    rng = np.random.default_rng(1)
    inputs = {n: rng.integers(-128, 128, (1, 128, 128, 1), dtype=np.int8) for n in (a, b)}
    got = _run_cli(SIMPLE_ADD, inputs, "qemu-m4", tmp_path)
    ref = _run_cli(SIMPLE_ADD, inputs, "reference", tmp_path)
    assert list(got) == list(ref) == ["PartitionedCall_0"]
    assert np.array_equal(got["PartitionedCall_0"], ref["PartitionedCall_0"])
    # The two inputs have different scales, so a swapped order would show.
    swapped = _run_cli(SIMPLE_ADD, {a: inputs[b], b: inputs[a]}, "reference", tmp_path)
    assert not np.array_equal(swapped["PartitionedCall_0"], ref["PartitionedCall_0"])


def _two_in_two_out() -> Graph:
    """Two inputs, two outputs of different sizes: each output depends on a different input."""
    rng = np.random.default_rng(0)
    g = Graph("two_in_two_out")
    x = g.input("x", (1, 16), "i8", quant=QuantParams(0.05, -3))
    y = g.input("y", (1, 16), "i8", quant=QuantParams(0.11, 7))
    s = g.add(x, y, out_quant=QuantParams(0.13, 1))
    wq = QuantParams(np.full(4, 0.01, np.float32), np.zeros(4, np.int64), axis=0)
    w = g.param("w", rng.integers(-127, 128, (4, 16)).astype(np.int8), quant=wq)
    b = g.param("b", rng.integers(-300, 300, 4).astype(np.int32))
    f = g.fully_connected(y, w, b, activation="none", out_quant=QuantParams(0.2, -5))
    g.output(f, s)
    return g


def test_two_outputs_of_different_sizes_bit_exact(tmp_path):
    model = tmp_path / "two.rlx"
    save(_two_in_two_out(), model)
    rng = np.random.default_rng(2)
    inputs = {n: rng.integers(-128, 128, (1, 16), dtype=np.int8) for n in ("x", "y")}
    got = _run_cli(model, inputs, "qemu-m4", tmp_path)
    ref = _run_cli(model, inputs, "reference", tmp_path)
    assert sorted(got) == sorted(ref) == ["add_0", "fully_connected_0"]
    assert got["fully_connected_0"].shape == (1, 4)
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k


def test_layout_rejects_a_wrong_input():
    layout = IoLayout.of(_two_in_two_out())
    ok = np.zeros((1, 16), np.int8)
    assert len(layout.pack({"x": ok, "y": ok})) == 32
    with pytest.raises(RlxError, match="input 'y' missing"):
        layout.pack({"x": ok})
    with pytest.raises(RlxError, match=r"input 'x' is int16\[1, 16\]; the model takes int8\[1, 16\]"):
        layout.pack({"x": ok.astype(np.int16), "y": ok})
    with pytest.raises(RlxError, match="sent 35 output bytes; the model's outputs have 20"):
        layout.unpack(bytes(35))
