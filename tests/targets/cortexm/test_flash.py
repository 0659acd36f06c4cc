"""Flash of the balanced build: model constants at int8 size, and VWW in a 256 KB-flash Cortex-M4 part.

The int8 budget of a model is what its layers need at the least: int8 weights,
int32 biases, and an int32 multiplier and shift per output channel of every
conv, depthwise and fully connected layer.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlx_edge.boards import Region, get_board
from rlx_edge.errors import RlxError
from rlx_edge.hil import qemu
from rlx_edge.targets.cortexm import build_model_firmware, emit, size_report
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run as run_reference

from .conftest import MLPERF

_WEIGHTED = ("conv2d", "depthwise_conv2d", "fully_connected")


def int8_budget(graph) -> int:
    total = 0
    for node in graph.nodes:
        if node.op not in _WEIGHTED:
            continue
        w = graph.params[node.inputs[1]]
        channels = w.shape[-1] if node.op == "depthwise_conv2d" else w.shape[0]
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        total += w.size + (4 * graph.params[bias].size if bias is not None else 0) + 8 * channels
    return total


@pytest.mark.parametrize("key", sorted(MLPERF))
def test_balanced_constants_within_int8_budget(mlperf_graph, key):
    graph = mlperf_graph(key)
    em = emit(graph)  # balanced is the default
    assert em.optimize == "balanced"
    budget = int8_budget(graph)
    # every array once, shared by both builds
    assert em.weight_bytes_dsp == em.weight_bytes_portable
    assert em.weight_bytes_dsp <= 1.10 * budget, f"{key}: {em.weight_bytes_dsp} B of constants, budget {budget} B"


def test_speed_keeps_the_wide_depthwise_layouts_and_output_is_deterministic(mlperf_graph):
    graph = mlperf_graph("kws")
    speed, balanced = emit(graph, "speed"), emit(graph, "balanced")
    # the int16 3x3 depthwise layouts: more flash on the DSP build, only under speed
    assert speed.weight_bytes_dsp > 1.3 * balanced.weight_bytes_dsp
    assert "#if RLX_USE_DSP\nconst" not in balanced.files["weights.c"]  # no array of one build only
    assert "#if RLX_USE_DSP\nconst" in speed.files["weights.c"]
    assert emit(graph, "speed").files == speed.files  # same input and options, same bytes
    with pytest.raises(RlxError, match="unknown optimize level 'fast'"):
        emit(graph, "fast")


def _m4_256k():
    # the QEMU M4 board with the flash of a 256 KB part (e.g. STM32F401CC): the linker script's
    # FLASH region is the board's, so an image that does not fit fails to link
    return dataclasses.replace(get_board("qemu-m4"), flash=Region(0, 256 * 1024))


def test_vww_links_for_a_256k_flash_m4_and_runs_bit_exact(mlperf_graph, tmp_path):
    graph = mlperf_graph("vww")
    board = _m4_256k()
    elf, info = build_model_firmware(graph, board, tmp_path, opt="-Os")
    assert info["optimize"] == "balanced"
    assert size_report(elf, board)["flash_bytes"] <= 256 * 1024
    sample = make_inputs(graph, 1, seed=3)[0]
    out_t = graph.types[graph.outputs[0]]
    (y,) = qemu.run_qemu(
        elf, board, [sample[graph.inputs[0]]], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape
    )
    assert np.array_equal(y, run_reference(graph, sample)[graph.outputs[0]])
    # the int16 layouts of --optimize speed do not fit that part
    with pytest.raises(RlxError, match="FLASH"):
        build_model_firmware(graph, board, tmp_path, opt="-Os", optimize="speed")
