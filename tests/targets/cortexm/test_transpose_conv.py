"""transpose_conv2d on the Cortex-M host build (kernels/rlx_transpose_conv.c, gather form) against the
reference, bit for bit: int8 and int16x8, every case of tconvgraphs as a branch of one build, on
random inputs and the storage limits; two of them under QEMU on an M4 and an M3."""

from __future__ import annotations

import numpy as np
import pytest
from tconvgraphs import CASES, g_tconv

from opgraphs import merge_graphs
from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import QemuSession
from rlx_edge.ir.interpret import run
from rlx_edge.targets.cortexm import build_model_firmware, compile_host
from rlx_edge.targets.cortexm.firmware import IoLayout
from rlx_edge.targets.cortexm.rules import layer_for


def test_transpose_conv_host_bit_exact(tmp_path):
    names = sorted(CASES)
    g = merge_graphs([g_tconv(**CASES[k]) for k in names], "tconv_cases", "c")
    model = compile_host(g, tmp_path)
    rng = np.random.default_rng(7)
    for k in range(6):
        feed = {}
        for v in g.inputs:
            t = g.types[v]
            info = np.iinfo(t.dtype.numpy)
            if k == 0:  # every input at its limits, alternating
                feed[v] = np.where(rng.random(tuple(t.shape)) < 0.5, info.min, info.max).astype(t.dtype.numpy)
            else:
                feed[v] = rng.integers(info.min, info.max + 1, tuple(t.shape)).astype(t.dtype.numpy)
        want, got = run(g, feed), model.run(feed)
        for i, o in enumerate(g.outputs):
            assert np.array_equal(want[o], got[o]), f"draw {k}: {names[i]}"


def test_kernel_needs_no_scratch():
    g = g_tconv()
    (node,) = g.nodes
    assert layer_for(g, node).scratch == 0


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_transpose_conv_qemu_bit_exact(core, tmp_path):
    """The same kernel built for an M4 (DSP) and an M3 (portable), run under QEMU."""
    names = ["int8_same_s3_k5", "int16_valid_s12"]
    g = merge_graphs([g_tconv(**CASES[k]) for k in names], "tconv_qemu", "c")
    board = ALIASES[f"qemu-{core}"]
    elf, _ = build_model_firmware(g, board, tmp_path)
    layout = IoLayout.of(g)
    rng = np.random.default_rng(8)
    with QemuSession(elf, board) as session:
        for k in range(2):
            feed = {}
            for v in g.inputs:
                info = np.iinfo(g.types[v].dtype.numpy)
                feed[v] = rng.integers(info.min, info.max + 1, tuple(g.types[v].shape)).astype(info.dtype)
            r = session.invoke(layout.pack(feed))
            assert r.status == 0
            got, want = layout.unpack(r.output), run(g, feed)
            for i, o in enumerate(g.outputs):
                assert np.array_equal(want[o], got[o]), f"{board}, draw {k}: {names[i]}"
        assert session.exit(0) == 0
