"""The MLPerf Tiny int8 models and TFLite Micro's examples on Verilator, bit-exact, with cycle bounds.

AD (5 inputs), KWS (5 inputs), IC ResNet-8 (1 input), and TFLite Micro's
micro_speech (5 inputs; it starts with a depth multiplier 8 layer on one
channel) stream through their generated datapaths on Verilator; every output
element must equal the integer reference's, and the measured cycles per
inference (first input beat to last output beat) must stay within 1.25x of
sum over layers of MACs / (PE x SIMD).

Parallelism 8 (PE x SIMD = 8 per layer) keeps each model's C++ small enough
to compile in about a minute on two cores; the simulations then run 0.04 M
(micro_speech), 0.3 M (KWS) and 1.6 M (IC) cycles per inference. Verilator
builds are cached by content hash (``RLX_FPGA_CACHE``), and the Verilator
runtime is compiled once for all of them. TFLite Micro's person_detect (31
layers, the same first layer as micro_speech, then KWS's kinds with strided
depthwise, which the component tests draw) took three minutes of the suite
on the pipelined datapath: it runs in ``bench/fpga.py --models person_detect``.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.fpga import build_fpga

CASES = {
    "ad": (MLPERF / "ad01_int8.tflite", 5),
    "kws": (MLPERF / "kws_ref_model.tflite", 5),
    "ic": (MLPERF / "pretrainedResnet_quant.tflite", 1),
    "micro_speech": (TFLM / "micro_speech_quantized.tflite", 5),
}
PARALLELISM = 8
MAC_OPS = ("conv2d", "depthwise_conv2d", "fully_connected")


@pytest.fixture(scope="module")
def fpga_runs(tmp_path_factory):
    cache: dict[str, dict] = {}

    def get(key: str) -> dict:
        if key not in cache:
            path, n = CASES[key]
            g = load_tflite(path)
            out = tmp_path_factory.mktemp(f"fpga_{key}")
            cache[key] = build_fpga(g, out, parallelism=PARALLELISM, simulate=True, inferences=n, seed=11)
        return cache[key]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CASES))
def test_model_bit_exact_on_verilator(fpga_runs, key):
    res = fpga_runs(key)
    assert res["simulator"] == "verilator"
    assert res["inferences"] == CASES[key][1]
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert all(o.shape[0] == CASES[key][1] for o in res["outputs"])
    # the weights really came from the $readmemh files: all-zero ROMs would give constant outputs
    assert any(len(np.unique(o.reshape(o.shape[0], -1), axis=0)) > 1 for o in res["outputs"]) or CASES[key][1] == 1
    assert res["files"]["roms"], "weights are in ROM files"


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CASES))
def test_cycles_within_bound_of_macs_per_pe_simd(fpga_runs, key):
    """Measured cycles per inference (I/O included) within 1.25x of sum over layers of MACs / (PE x SIMD)."""
    res = fpga_runs(key)
    ideal = res["ideal_cycles"]
    assert ideal > 0
    assert np.isclose(sum(r["macs"] for r in res["per_layer"]), res["macs"])
    assert all(c <= 1.25 * ideal for c in res["cycles_per_inference"]), (res["cycles_per_inference"], ideal)
    for row in res["per_layer"]:
        # one loop step per cycle, no stalls: only the start pulse and the pipeline's latency on top
        assert row["cycles"] == row["steps"] + row["fill"], row
        if row["op"] in MAC_OPS:
            assert row["pe"] * row["simd"] <= PARALLELISM
            # fill: window lag (3), ROM read (+1 per bank-multiplexer level and for the banks' address
            # registers), operands, products (4: arith.dsp_product), adder tree, accumulate,
            # requantizer (6 of its 10 stages the doubling high multiply), write; and with the
            # requantizer lanes shared, the latch and one turn per lane group (at most PE)
            assert row["cycles"] <= row["ideal_cycles"] + 25 + row["pe"], row
