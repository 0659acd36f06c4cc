"""HIL campaigns of the four int8 MLPerf Tiny models: every output bit-exact with the reference.

Against QEMU by default; with --board/--port the same campaigns run on a
real board (flashed first with its definition's tool). On the default boards
(an386 M4, an385 M3) they are also the test suite's firmware-under-QEMU check
of these four models: tests/targets/cortexm/test_qemu_models.py does not run
them again and fails if COUNTS or the default boards stop covering them.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.campaign import run_campaign
from rlx_edge.targets.cortexm import build_model_firmware

# The two small models get 20 inputs, the two large ones 5 (an emulated VWW
# inference takes seconds).
# Longest first: on a farm (pytest-xdist, one worker per place) the campaigns
# are handed out in this order, and the longest one bounds the run.
COUNTS = {"vww_96_int8": 5, "pretrainedResnet_quant": 5, "ad01_int8": 20, "kws_ref_model": 20}


@pytest.fixture(scope="module")
def graphs():
    return {m: load_tflite(MLPERF / f"{m}.tflite") for m in COUNTS}


@pytest.mark.parametrize("model", list(COUNTS))
def test_campaign_is_bit_exact(graphs, hil_board, hil_place, hil_options, firmware_cache, model):
    with contextlib.ExitStack() as on_place:
        port = hil_options["port"]
        if hil_place is not None:
            # The place is flashed here, through labgrid; run_campaign only talks to its UART.
            elf, _ = build_model_firmware(graphs[model], hil_board, firmware_cache)
            port = on_place.enter_context(hil_place.running(elf))
        report = run_campaign(
            graphs[model],
            hil_board,
            port=port,
            count=COUNTS[model],
            progress=False,
            workdir=firmware_cache,
            flash=hil_options["flash"] and hil_place is None,
            probe=hil_options["probe"],
        )
    rec = report.to_json()
    print(json.dumps({k: rec[k] for k in ("model", "board", "count", "mismatches", "latency", "link")}))
    assert rec["errors"] == 0, rec["error_messages"]
    assert rec["count"] == COUNTS[model]
    assert rec["mismatches"] == 0, rec["first_mismatch"]
    assert rec["ok"]
    assert rec["board_info"]["core"] == hil_board.core
    assert rec["board_info"]["model_name"] == model
    lat = rec["latency"]["ticks"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["max"]
