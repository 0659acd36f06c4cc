"""HIL campaigns of the four int8 MLPerf Tiny models: every output bit-exact with the reference.

Against QEMU by default; with --board/--port the same campaigns run on a
real board (flashed first with its definition's tool). On the default boards
(an386 M4, an385 M3) they are also the test suite's firmware-under-QEMU check
of these four models: tests/targets/cortexm/test_qemu_models.py does not run
them again and fails if COUNTS or the default boards stop covering them.

``--inputs N`` runs N inputs per model instead of COUNTS. A campaign of more
than PER_TEST inputs is split into tests of PER_TEST consecutive inputs each
(ids ``model-2of4``), so that on a farm the places of a board share a long
campaign; the inputs are those of one campaign of N, whichever place runs
which part.
"""

from __future__ import annotations

import contextlib
import json
import math

import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.campaign import campaign_inputs, run_campaign
from rlx_edge.targets.cortexm import build_model_firmware

# The two small models get 20 inputs, the two large ones 5 (an emulated VWW inference
# takes about a second, most of it moving its 27 KB input over the UART): what CI's time
# allows; a nightly campaign runs --inputs 20 or more. Longest first: on a farm
# (pytest-xdist, one worker per place) the campaigns are handed out in this order, and the
# longest one bounds the run (a KWS input takes 1.5 x an AD input: KWS before AD, so that the
# last test handed out is the shortest).
COUNTS = {"vww_96_int8": 5, "pretrainedResnet_quant": 5, "kws_ref_model": 20, "ad01_int8": 20}
# Inputs per test: none much longer than 5 VWW inputs (about 5 s emulated on a 16-core host).
PER_TEST = {"vww_96_int8": 5, "pretrainedResnet_quant": 10, "ad01_int8": 40, "kws_ref_model": 40}


def pytest_generate_tests(metafunc):
    if "campaign_part" not in metafunc.fixturenames:
        return
    wanted = metafunc.config.getoption("--inputs")
    params, ids = [], []
    for model, default in COUNTS.items():
        count = wanted or default
        parts = math.ceil(count / PER_TEST[model])
        for k in range(parts):
            lo, hi = k * count // parts, (k + 1) * count // parts
            params.append((model, count, lo, hi))
            ids.append(model if parts == 1 else f"{model}-{k + 1}of{parts}")
    metafunc.parametrize("campaign_part", params, ids=ids)


@pytest.fixture(scope="module")
def graphs():
    return {m: load_tflite(MLPERF / f"{m}.tflite") for m in COUNTS}


def test_campaign_is_bit_exact(graphs, hil_board, hil_place, hil_options, firmware_cache, campaign_part):
    model, count, lo, hi = campaign_part
    graph = graphs[model]
    # The campaign's whole input set, then this test's slice of it: the edge inputs end the last part.
    xs, _ = campaign_inputs(graph, None, count=count)
    with contextlib.ExitStack() as on_place:
        port = hil_options["port"]
        if hil_place is not None:
            # The place is flashed here, through labgrid; run_campaign only talks to its UART.
            elf, _ = build_model_firmware(graph, hil_board, firmware_cache)
            port = on_place.enter_context(hil_place.running(elf))
        report = run_campaign(
            graph,
            hil_board,
            port=port,
            data=xs[lo:hi],
            progress=False,
            workdir=firmware_cache,
            flash=hil_options["flash"] and hil_place is None,
            probe=hil_options["probe"],
        )
    rec = report.to_json()
    print(json.dumps({k: rec[k] for k in ("model", "board", "count", "mismatches", "latency", "link")}))
    assert rec["errors"] == 0, rec["error_messages"]
    assert rec["count"] == hi - lo
    assert rec["mismatches"] == 0, rec["first_mismatch"]
    assert rec["ok"]
    assert rec["board_info"]["core"] == hil_board.core
    assert rec["board_info"]["model_name"] == model
    lat = rec["latency"]["ticks"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["max"]
