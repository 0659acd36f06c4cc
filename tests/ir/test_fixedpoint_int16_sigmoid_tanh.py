"""int16 logistic and tanh of rlx_edge.ir.fixedpoint against TFLite Micro, over every int16 input.

One single-op int16 LOGISTIC / TANH model per input scale is written by the
exporter and run in TFLite Micro on all 65536 inputs; ``logistic_int16`` /
``tanh_int16``, given the multiplier and shift of
``int16_sigmoid_tanh_input_params``, must equal its outputs. The scales take
both of the kernels' forms: power-of-two scales the table's grid takes
directly (multiplier 0) and general ones (a 15-bit multiplier and a right
shift); together they drive the rescaled input through every table step
up to the saturation, so every table entry is read.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite
from rlx_edge.frontends.tflm import run_tflm
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams

ALL_INT16 = np.arange(fp.INT16_MIN, fp.INT16_MAX + 1, dtype=np.int16).reshape(1, -1)
OUT_SCALE = 1.0 / 32768  # TFLite fixes the int16 output at 2**-15, zero point 0

# (op, input scale, the multiplier and shift TFLite Micro's Prepare derives)
CASES = [
    ("sigmoid", 2.0**-12, (0, 0)),
    ("sigmoid", 2.0**-11, (24576, 12)),  # a power of two, but not the one the kernel takes as it is
    ("sigmoid", 0.001, (25165, 11)),
    ("sigmoid", 3e-5, (24159, 16)),
    ("sigmoid", 0.2, (19660, 3)),
    ("tanh", 2.0**-12, (0, 0)),
    ("tanh", 2.0**-11, (0, 1)),
    ("tanh", 0.001, (25165, 11)),
    ("tanh", 0.2, (19660, 3)),
]


def _tflm_outputs(op: str, scale: float, tmp_path) -> np.ndarray:
    g = Graph(op)
    x = g.input("x", ALL_INT16.shape, "i16", quant=QuantParams(np.float32(scale), 0, storage="i16"))
    g.output(getattr(g, op)(x, out_quant=QuantParams(np.float32(OUT_SCALE), 0, storage="i16")))
    path = tmp_path / f"{op}.tflite"
    export_tflite(g, path)
    (out,) = run_tflm(path, [ALL_INT16])
    return out


@pytest.mark.parametrize(("op", "scale", "params"), CASES, ids=[f"{c[0]}-{c[1]:g}" for c in CASES])
def test_int16_sigmoid_tanh_match_tflm_on_every_input(op, scale, params, tmp_path):
    mult, shift = fp.int16_sigmoid_tanh_input_params(np.float32(scale), tanh=op == "tanh")
    assert (mult, shift) == params
    fn = fp.tanh_int16 if op == "tanh" else fp.logistic_int16
    got = fn(ALL_INT16.astype(np.int64), mult, shift)
    want = _tflm_outputs(op, scale, tmp_path)
    assert want.dtype == np.int16
    assert np.array_equal(got, want), f"{int((got != want).sum())} of 65536 outputs differ"


@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_every_table_entry_is_read(op):
    """Each op's cases reach every table step 0..254 (step i reads entries i and i + 1), so they pin all 256."""
    frac_bits = 8 if op == "tanh" else 9
    steps: set[int] = set()
    for case_op, _, (mult, shift) in CASES:
        if case_op == op:
            if mult == 0:
                mult, shift = 3 << shift, 0
            rnd = (1 << (shift - 1)) if shift else 0
            v = (ALL_INT16.astype(np.int64) * mult + rnd) >> shift
            steps |= set((np.abs(v) >> frac_bits).ravel().tolist())
    assert set(range(255)) <= steps


def test_table_is_monotonic_sigmoid_in_q0_16():
    t = fp.SIGMOID_TABLE_UINT16
    assert t.shape == (256,) and t[0] == 32768 and t[-1] == 0xFFFF
    assert np.all(np.diff(t) >= 0)
    exact = 65536 / (1 + np.exp(-np.arange(256) / 24))
    assert np.max(np.abs(t - exact)) < 1.2  # the midpoint bias moves entries by at most about one unit


def test_negative_shift_is_refused():
    with pytest.raises(ValueError, match="input_left_shift"):
        fp.logistic_int16(np.zeros(3, np.int64), 0, -1)
