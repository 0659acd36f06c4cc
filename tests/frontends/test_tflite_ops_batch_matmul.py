"""TFLite BATCH_MATMUL against TFLite Micro, bit for bit (float32 within compare's tolerance).

Written from the IR's matmul (no adjoint flags), read back, run on seeded inputs and the edge
inputs; a file with the adjoint flags imports as transposes before the matmul.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends import _tflite_export
from rlx_edge.frontends._tflite_ops import BUILTINS
from rlx_edge.frontends.tflite import load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((3, 4), (1, 2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2))]


def _graph(dtype: str, sa, sb, qs=None) -> Graph:
    g = Graph("batch_matmul")
    qa, qb, qy = qs or (None, None, None)
    a = g.input("a", sa, dtype, quant=qa)
    b = g.input("b", sb, dtype, quant=qb)
    g.output(g.matmul(a, b, out_quant=qy))
    return g


def _q(dtype: str, scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage=dtype)


QUANT = {
    # int8: zero points on both operands and the output (TFLite Micro's offsets)
    "i8": (_q("i8", 0.05, 3), _q("i8", 0.04, -7), _q("i8", 0.5, 2)),
    # int16: symmetric, as TFLite Micro requires
    "i16": (_q("i16", 0.0005, 0), _q("i16", 0.0004, 0), _q("i16", 0.001, 0)),
}


@pytest.mark.parametrize("dtype", ["f32", "i8", "i16"])
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_tflm(dtype, shapes, tmp_path) -> None:
    g = _graph(dtype, *shapes, QUANT.get(dtype))
    path = tmp_path / "bmm.tflite"
    path.write_bytes(to_tflite_bytes(g))
    assert [n.op for n in load_tflite(path).nodes] == ["matmul"]
    r = compare_with_tflm(path, n_inputs=10, seed=4)
    assert r.compared >= 10 and r.mismatches == 0, r.first_mismatch


@pytest.mark.parametrize("adj", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", ["f32", "i8"])
def test_adjoint_flags_import_as_transposes(adj, dtype, monkeypatch) -> None:
    """A file with AdjX / AdjY (which the exporter never writes): the square operands let the same
    graph carry them; TFLite Micro multiplies the transposes, and so must the imported graph."""
    flags = {"AdjX": adj[0], "AdjY": adj[1]}

    def with_flags(w, node):
        return _tflite_export._op_out(w, node, BUILTINS["BATCH_MATMUL"], **flags)

    monkeypatch.setitem(_tflite_export._RULES._entries, "matmul", with_flags)
    data = to_tflite_bytes(_graph(dtype, (2, 4, 4), (2, 4, 4), QUANT.get(dtype)))
    g = load_tflite_bytes(data)
    assert [n.op for n in g.nodes] == ["transpose"] * sum(adj) + ["matmul"]
    rng = np.random.default_rng(9)
    feed = {n: rng.integers(-128, 128, (2, 4, 4)).astype(np.int8) for n in g.inputs}
    if dtype == "f32":
        feed = {n: rng.normal(size=(2, 4, 4)).astype(np.float32) for n in g.inputs}
    with TflmModel(data) as m:
        (want,) = m([feed[n] for n in g.inputs])
    got = run(g, feed)[g.outputs[0]]
    if dtype == "f32":  # float32 sums in another order than TFLite Micro's loop
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        assert np.array_equal(got, want)
    a, b = (feed[n].astype(np.float64) for n in g.inputs)
    plain = a @ b
    assert not np.allclose(plain, np.swapaxes(a, -1, -2) @ b)  # the flags change the result


def test_vector_operand_is_not_written() -> None:
    g = _graph("f32", (4,), (4, 5))
    with pytest.raises(UnsupportedOpError, match="BATCH_MATMUL takes 2 to 5"):
        to_tflite_bytes(g)
