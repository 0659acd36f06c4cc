"""rlx_lut_s16: gelu and silu on int16 activations (TFLite's interpolated 513-entry table) on the host builds.

Every int16 input goes through each op, in one model, at scales whose outputs stay in range
and at ones whose outputs saturate (TFLite's lookup then wraps the slope and the result to
int16, and so must the kernel); both host builds must equal the reference bit for bit, and
firmware on QEMU M4 must on a chain of gelu (saturating) and silu.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.reference import run

from ..conftest import check_feed, q16

ALL_INT16 = np.arange(fp.INT16_MIN, fp.INT16_MAX + 1, dtype=np.int16).reshape(4, -1)
# (op, approximate, input scale, output scale): the last of each op saturates
CASES = [("gelu", "none", 2.0**-12, 2.0**-12), ("gelu", "tanh", 1.7e-4, 1.3e-4), ("gelu", "none", 0.0199, 2.88e-5),
         ("silu", None, 3e-4, 4e-4), ("silu", None, 0.03, 1e-5)]  # fmt: skip


def _graph() -> Graph:
    g = Graph("lut-s16")
    for k, (op, approximate, s_x, s_y) in enumerate(CASES):
        x = g.input(f"x{k}", ALL_INT16.shape, "i16", quant=q16(s_x))
        attrs = {} if approximate is None else {"approximate": approximate}
        g.output(getattr(g, op)(x, name=f"{op}{k}", out_quant=q16(s_y), **attrs))
    return g


def test_every_int16_input_is_bit_exact(host_dir) -> None:
    g = _graph()
    assert emit(g).files["model.c"].count("rlx_lut_s16(") == len(CASES)
    want = check_feed(g, host_dir, {f"x{k}": ALL_INT16 for k in range(len(CASES))})
    assert len({w.tobytes() for w in want.values()}) == len(CASES)
    # the saturating cases do wrap: just above 0 the real value is positive, the wrapped outputs negative
    for k in (2, 4):
        assert (want[f"{CASES[k][0]}{k}"].reshape(-1)[32768 + 1 : 32768 + 128] < 0).all()


def test_qemu_m4_is_bit_exact(tmp_path) -> None:
    g = Graph("lut-s16-fw")
    x = g.input("x", (1, 1024), "i16", quant=q16(0.0199))
    y = g.gelu(x, name="gelu", out_quant=q16(2.88e-5))  # saturates and wraps
    g.output(g.silu(y, name="out", out_quant=q16(2.0**-15)))
    board = ALIASES["qemu-m4"]
    elf, _ = build_model_firmware(g, board, tmp_path / "fw")
    # the 64 slices of every int16 input, 8 of them: both signs, the wrapping segment (slice 32)
    inputs = [ALL_INT16.reshape(-1)[k * 1024 : (k + 1) * 1024].reshape(1, 1024) for k in (0, 9, 18, 27, 32, 36, 45, 63)]
    got = run_qemu(elf, board, inputs, output_dtype=np.int16, output_shape=(1, 1024))
    for k, (xin, out) in enumerate(zip(inputs, got)):
        np.testing.assert_array_equal(out, run(g, {"x": xin})["out"], err_msg=f"input {k}")
