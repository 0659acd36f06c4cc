"""The generated C as firmware under QEMU, bit-exact with the integer reference on real models: who runs it.

Every (model, board) pair below used to be built and run here too, a second time in the same
suite (~125 s of test time): the same ``build_model_firmware`` image, the same QEMU board, the
same bit-exact comparison. They run once, in

- ``hil/test_mlperf_campaigns.py``: the four MLPerf Tiny models on ``qemu-mps2-an386`` (M4) and
  ``qemu-mps2-an385`` (M3), the ``hil/`` suite's default boards, every output compared with the
  reference; each campaign's inputs end with the all-minimum, all-maximum and all-zero-point inputs;
- ``tests/hil/test_qemu_model.py``: KWS on all four QEMU boards (``an500`` M7 and ``an505`` M33
  included), inputs near the zero point, over the whole range and at both extremes.

The checks here fail when one of those stops covering a pair, so the coverage cannot drift away
silently.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.campaign import campaign_inputs

ROOT = Path(__file__).resolve().parents[3]
MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
CASES = [(m, b) for m in MODELS for b in ("qemu-mps2-an386", "qemu-mps2-an385")] + [
    ("kws_ref_model", "qemu-mps2-an505"),
    ("kws_ref_model", "qemu-mps2-an500"),
]


def _constant(path: Path, name: str):
    """The literal value of the module-level assignment ``name`` in ``path``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path}: no module-level {name}")


def test_every_model_and_board_runs_under_qemu_elsewhere():
    campaigns = _constant(ROOT / "hil" / "test_mlperf_campaigns.py", "COUNTS")
    hil_boards = _constant(ROOT / "hil" / "conftest.py", "DEFAULT_BOARDS").split(",")
    kws_boards = _constant(ROOT / "tests" / "hil" / "test_qemu_model.py", "BOARDS")
    kws_text = (ROOT / "tests" / "hil" / "test_qemu_model.py").read_text()
    covered = {(m, b) for m in campaigns for b in hil_boards}
    covered |= {("kws_ref_model", b) for b in kws_boards if "kws_ref_model.tflite" in kws_text}
    assert set(CASES) <= covered, sorted(set(CASES) - covered)
    # a campaign of fewer than 4 inputs would be edge inputs only (or miss some): at least one random
    assert all(campaigns[m] >= 4 for m in MODELS), campaigns


def test_campaign_inputs_end_with_the_three_edge_inputs():
    """What test_firmware_is_bit_exact fed here (random inputs, then min, max and the zero point), the
    campaigns feed too."""
    g = load_tflite(MLPERF / "ad01_int8.tflite")
    t = g.types[g.inputs[0]]
    xs, _ = campaign_inputs(g, None, count=5)
    assert len(xs) == 5
    zp = int(t.quant.zero_point[0])
    for x, value in zip(xs[-3:], (-128, 127, zp)):
        assert x.dtype == np.int8 and np.array_equal(x, np.full(x.shape, value, np.int8)), value
    assert len({x.tobytes() for x in xs[:2]}) == 2 and all(x.min() < x.max() for x in xs[:2])
