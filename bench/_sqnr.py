"""Per-layer SQNR decomposition and mixed precision on the MLPerf Tiny float models (bench/quantize.py --mlperf).

For each model and the same seeded calibration samples (uniform noise in the
input's range, the samples calibration saw), per-layer SQNR of every value
against the float model's trace, median over layers:

- ``int8``, ``int16x8``: the real integer graphs through the reference
  (:func:`rlx_edge.quant.report.quantization_report`, what users see);
- ``weights_only``: the float graph with the int8 graph's weights
  (per-channel int8, dequantized), float activations;
- ``int16_float_weights``: the float graph with every activation rounded to
  the int16x8 graph's grid, float weights;
- ``int8_float_weights``: the same on the int8 graph's grid;
- ``int16x8_sim`` and ``int8_sim``: both roundings together, a check that the
  simulation reproduces the integer graphs (it should, within a fraction of a dB).

Medians are over all compared values (``all``: every quantized value, as the
report lists them, the graph input included) and over conv / depthwise / FC
outputs only (``weighted``). Each mixed record runs
:func:`rlx_edge.quant.mixed.select_mixed` with a target ``below_db`` under the
all-int8 output SQNR (0: int8's own quality).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run, run_node
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize
from rlx_edge.pipeline import optimize_graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.mixed import graph_flash_bytes, select_mixed
from rlx_edge.quant.ptq import WEIGHTED, dequantize_weights, quantize
from rlx_edge.quant.report import quantization_report

# name -> (file under models/mlperf-tiny, input range of the seeded calibration noise)
MODELS = {"vww": ("vww_96_float.tflite", 0.0, 1.0), "ic": ("pretrainedResnet.tflite", 0.0, 255.0)}
EXACT = 200.0  # dB counted for a value with no error at all (the median needs a number)


def _sqnr(sig: float, err: float) -> float:
    return EXACT if err == 0 else 10.0 * float(np.log10(sig / err))


def _simulate(g: Graph, q: Graph, x: np.ndarray, fake_weights: bool, fake_acts: bool) -> dict[str, float]:
    """Per-value SQNR of the float graph run with ``q``'s weights and/or ``q``'s activation grids."""
    vmap = q.metadata["quantization"]["values"]
    made_by = {o: n for n in q.nodes for o in n.outputs}

    def rounded(v: str, a: np.ndarray) -> np.ndarray:
        qp = q.types[vmap[v]].quant
        return affine_dequantize(affine_quantize(a, qp, qp.storage), qp) if fake_acts and v in vmap else a

    sig: dict[str, float] = {}
    err: dict[str, float] = {}
    for i in range(len(x)):
        xi = x[i : i + 1]
        _, want = run(g, xi, trace=True)
        env = {**g.params, g.inputs[0]: rounded(g.inputs[0], xi)}
        want[g.inputs[0]] = xi
        for node in g.nodes:
            args = [None if v is None else env[v] for v in node.inputs]
            if fake_weights and node.op in WEIGHTED and node.outputs[0] in vmap:
                wname = made_by[vmap[node.outputs[0]]].inputs[1]
                wq = q.types[wname].quant
                args[1] = dequantize_weights(q.params[wname], wq.scale, wq.axis).astype(np.float32)
            for o, a in zip(node.outputs, run_node(g, node, args)):
                env[o] = rounded(o, np.asarray(a))
        for v in vmap:
            f = want[v].astype(np.float64)
            d = env[v].astype(np.float64).reshape(f.shape)
            sig[v] = sig.get(v, 0.0) + float(np.sum(f * f))
            err[v] = err.get(v, 0.0) + float(np.sum((f - d) ** 2))
    return {v: _sqnr(sig[v], err[v]) for v in sig}


def _medians(per_value: dict[str, float], weighted: set[str]) -> dict[str, Any]:
    allv = list(per_value.values())
    w = [s for v, s in per_value.items() if v in weighted]
    return {"all": round(float(np.median(allv)), 2), "weighted": round(float(np.median(w)), 2), "n": len(allv)}


def decomposition(models_dir: Path, name: str, samples: int, seed: int = 0) -> dict[str, Any]:
    """The per-layer SQNR medians of every variant for one model (one result record)."""
    file, lo, hi = MODELS[name]
    g, _ = optimize_graph(load_tflite(models_dir / file))
    shape = tuple(g.types[g.inputs[0]].shape)
    x = np.random.default_rng(seed).uniform(lo, hi, (samples, *shape[1:])).astype(np.float32)
    rec = calibrate(g, x, optimize=False)
    weighted = {n.outputs[0] for n in g.nodes if n.op in WEIGHTED}
    t0 = time.perf_counter()
    q8 = quantize(g, rec, scheme="int8", optimize=False)
    q16 = quantize(g, rec, scheme="int16x8", optimize=False)
    per: dict[str, dict[str, float]] = {}
    outputs = {}
    for label, q in (("int8", q8), ("int16x8", q16)):
        rep = quantization_report(g, q, x, optimize=False)
        per[label] = {r["value"]: EXACT if r["sqnr_db"] is None else r["sqnr_db"] for r in rep["layers"]}
        outputs[label] = {o: s["sqnr_db"] for o, s in rep["outputs"].items()}
    per["weights_only"] = _simulate(g, q8, x, fake_weights=True, fake_acts=False)
    per["int16_float_weights"] = _simulate(g, q16, x, fake_weights=False, fake_acts=True)
    per["int8_float_weights"] = _simulate(g, q8, x, fake_weights=False, fake_acts=True)
    per["int16x8_sim"] = _simulate(g, q16, x, fake_weights=True, fake_acts=True)
    per["int8_sim"] = _simulate(g, q8, x, fake_weights=True, fake_acts=True)
    med = {k: _medians(v, weighted) for k, v in per.items()}
    return {
        "kind": "sqnr_decomposition",
        "model": name,
        "file": file,
        "samples": samples,
        "calibration": f"uniform [{lo:g}, {hi:g}], seed {seed}; SQNR measured on the same samples",
        "median_layer_sqnr_db": med,
        "int16x8_minus_int8_db": {k: round(med["int16x8"][k] - med["int8"][k], 2) for k in ("all", "weighted")},
        "output_sqnr_db": outputs,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def mixed_record(models_dir: Path, name: str, samples: int, below_db: float, seed: int = 0) -> dict[str, Any]:
    """select_mixed with the all-int8 output SQNR less ``below_db`` as the target: the flash that buys."""
    file, lo, hi = MODELS[name]
    g, _ = optimize_graph(load_tflite(models_dir / file))
    shape = tuple(g.types[g.inputs[0]].shape)
    x = np.random.default_rng(seed).uniform(lo, hi, (samples, *shape[1:])).astype(np.float32)
    rec = calibrate(g, x, optimize=False)
    q8 = quantize(g, rec, scheme="int8", optimize=False)
    target = min(s["sqnr_db"] for s in quantization_report(g, q8, x, optimize=False)["outputs"].values())
    t0 = time.perf_counter()
    got = select_mixed(g, rec, x, round(target - below_db, 2), optimize=False)
    seconds = time.perf_counter() - t0
    summary = got.to_json()
    return {
        "kind": "mixed",
        "model": name,
        "file": file,
        "samples": samples,
        "target": f"the all-int8 output SQNR less {below_db:g} dB",
        **{k: v for k, v in summary.items() if k != "layers"},
        "layer_schemes": {row["node"]: row["scheme"] for row in summary["layers"]},
        "int8_flash_bytes": graph_flash_bytes(q8),
        "int4w_flash_bytes": graph_flash_bytes(quantize(g, rec, scheme="int4w", optimize=False)),
        "seconds": round(seconds, 1),
    }
