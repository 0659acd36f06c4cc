"""int8 SOFTMAX and the betas TFLite Micro's kernel takes.

Its prepare (PreprocessSoftmaxScaling) needs the Q5.26 input multiplier beta * s_x * 2**26 above 1
and aborts otherwise, so a negative, zero or tiny beta has no int8 kernel: TFLite Micro aborts
on such a model (written here past the exporter's refusal), the exporter refuses to write one and
the reference's prepare says why. Just above the bound, the reference matches TFLite Micro.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.frontends import _tflite_export
from rlx_edge.frontends.tflite import to_tflite_bytes
from rlx_edge.frontends.tflm import TflmError, TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

REFUSAL = r"int8 softmax needs beta \* input scale > 2\*\*-26"


def _graph(beta: float, s_x: float) -> Graph:
    g = Graph("softmax")
    x = g.input("x", (3, 6), "i8", quant=QuantParams(np.float32(s_x), -3))
    g.output(g.softmax(x, beta=beta, out_quant=QuantParams(np.float32(1 / 256), -128)))
    return g


@pytest.mark.parametrize("beta,s_x", [(-1.0, 0.08), (0.0, 0.08), (1.0, 2.0**-27)], ids=["negative", "zero", "tiny"])
def test_a_beta_without_an_int8_kernel_is_refused(beta: float, s_x: float) -> None:
    g = _graph(beta, s_x)
    with pytest.raises(UnsupportedOpError, match=REFUSAL):
        to_tflite_bytes(g)
    with pytest.raises(RlxError, match=REFUSAL):
        run(g, {"x": np.zeros((3, 6), np.int8)})


def test_tflm_aborts_on_the_model_the_exporter_refuses(monkeypatch) -> None:
    monkeypatch.setattr(_tflite_export, "int8_softmax_refusal", lambda beta, s_x: None)
    data = to_tflite_bytes(_graph(-1.0, 0.08))
    with pytest.raises(TflmError, match="SIGABRT"):
        with TflmModel(data) as m:
            m([np.zeros((3, 6), np.int8)])


def test_just_above_the_bound_matches_tflm(tmp_path) -> None:
    path = tmp_path / "softmax.tflite"
    path.write_bytes(to_tflite_bytes(_graph(1.0, 1.5 * 2.0**-26)))
    r = compare_with_tflm(path, n_inputs=10, seed=4)
    assert r.inputs == 10 and r.mismatches == 0, r.first_mismatch
