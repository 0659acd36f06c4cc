"""rlx_activation_s16: int16 logistic and tanh (TFLite's 16x8 LOGISTIC / TANH) on the host builds, bit-exact.

Every int16 input goes through each op at input scales of both of the
kernels' forms (a power of two taken as it is: multiplier 0; any other scale:
a 15-bit multiplier and a right shift), in one model; both host builds
(portable, emulated DSP) must equal the reference; so must firmware on QEMU
M4 (DSP build) and M3 (portable), on a chain of both kernels. The C table must
be ``fixedpoint.SIGMOID_TABLE_UINT16`` entry for entry.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.cortexm.emit import kernel_sources
from rlx_edge.targets.reference import run

from ..conftest import check_feed, q16

ALL_INT16 = np.arange(fp.INT16_MIN, fp.INT16_MAX + 1, dtype=np.int16).reshape(4, -1)
# (op, input scale): 2**-12 / 2**-11 are the power-of-two forms; 0.2 saturates most inputs, 3e-5 none
SCALES = [("sigmoid", 2.0**-12), ("sigmoid", 0.001), ("sigmoid", 0.2), ("sigmoid", 3e-5),
          ("tanh", 2.0**-12), ("tanh", 2.0**-11), ("tanh", 0.001), ("tanh", 0.2)]  # fmt: skip


def _graph() -> Graph:
    g = Graph("activation-s16")
    for k, (op, scale) in enumerate(SCALES):
        x = g.input(f"x{k}", ALL_INT16.shape, "i16", quant=q16(scale))
        g.output(getattr(g, op)(x, name=f"{op}{k}", out_quant=q16(2.0**-15)))
    return g


def test_every_int16_input_is_bit_exact(host_dir) -> None:
    g = _graph()
    assert emit(g).files["model.c"].count("rlx_activation_s16(") == len(SCALES)
    feed = {f"x{k}": ALL_INT16 for k in range(len(SCALES))}
    want = check_feed(g, host_dir, feed)
    assert len({w.tobytes() for w in want.values()}) == len(SCALES)  # distinct parameters, distinct outputs
    assert all(w.dtype == np.int16 for w in want.values())


def test_c_table_is_the_reference_table() -> None:
    src = kernel_sources()["rlx_activation_s16.c"]
    body = re.search(r"rlx_sigmoid_table_u16\[256\] = \{([^}]*)\}", src)
    assert body is not None
    c_table = np.array([int(v) for v in re.findall(r"\d+", body.group(1))])
    assert np.array_equal(c_table, fp.SIGMOID_TABLE_UINT16)


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_qemu_is_bit_exact(core, tmp_path) -> None:
    """tanh of a general scale (a multiplier), then sigmoid of tanh's 2**-15 output (a power of two the
    kernel does not take as it is: a multiplier again) and of a 2**-12 input (multiplier 0)."""
    g = Graph("activation-s16-fw")
    x = g.input("x", (1, 1024), "i16", quant=q16(0.001))
    t = g.tanh(x, name="tanh", out_quant=q16(2.0**-15))
    s = g.sigmoid(t, name="sig", out_quant=q16(2.0**-15))
    g.output(g.sigmoid(g.reshape(s, shape=(1, 1024), name="view", out_quant=q16(2.0**-12)), name="out",
                       out_quant=q16(2.0**-15)))  # fmt: skip
    board = ALIASES[f"qemu-{core}"]
    elf, _ = build_model_firmware(g, board, tmp_path / "fw")
    inputs = [ALL_INT16.reshape(-1)[k * 1024 : (k + 1) * 1024].reshape(1, 1024) for k in range(0, 64, 9)]
    got = run_qemu(elf, board, inputs, output_dtype=np.int16, output_shape=(1, 1024))
    for k, (xin, y) in enumerate(zip(inputs, got)):
        np.testing.assert_array_equal(y, run(g, {"x": xin})["out"], err_msg=f"{board}, input {k}")
