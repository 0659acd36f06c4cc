"""How much quantization changed a model: per-layer SQNR, output error, top-1 agreement.

Both graphs run on the same float samples (the quantized one gets them
quantized with its input parameters when its interface is integer); each
quantized value is dequantized and compared with the float value of the same
name. SQNR is ``10 log10(sum f^2 / sum (f - q)^2)`` over all samples, in dB
(higher is better; int8 layers are typically 30-45 dB). The report also
carries PTQ's own counts (``numerics``): values clipped silently, biases whose
weight scale was raised, degenerate ranges, per tensor.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge._io import atomic_write_text
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize
from rlx_edge.pipeline import PipelineOptions, optimize_graph


def _sqnr(sig: float, err: float) -> float | None:
    if err == 0.0:
        return None  # exact: JSON has no infinity; None reads as "no error"
    if sig == 0.0:
        return -math.inf
    return 10.0 * math.log10(sig / err)


def _real(graph: Graph, name: str, arr: np.ndarray) -> np.ndarray:
    t = graph.types[name]
    if t.quant is not None and t.dtype.is_int:
        return affine_dequantize(arr, t.quant).astype(np.float64)
    return arr.astype(np.float64)


def quantization_report(
    float_graph: Graph,
    quant_graph: Graph,
    data: Any,
    *,
    labels: np.ndarray | None = None,
    max_samples: int | None = None,
    batch_size: int = 32,
    optimize: bool = True,
) -> dict[str, Any]:
    """Compare ``quant_graph`` (from :func:`~rlx_edge.quant.ptq.quantize`) with ``float_graph`` on ``data``.

    ``labels`` (one class index per sample) adds float and quantized accuracy.
    Returns a JSON-ready dict: ``layers`` (value, op, sqnr_db), ``outputs``
    (per output: sqnr_db, max_abs_error, mean_abs_error, top1_agreement),
    ``samples``, ``numerics`` (what PTQ clipped or adjusted: ``silent_clips``,
    ``bias_adjusted``, ``degenerate`` and per-tensor counts; None for a graph
    :func:`~rlx_edge.quant.ptq.quantize` did not make) and, with labels,
    ``accuracy``. ``float_graph`` goes through
    the optimizer first, as in quantization, unless ``optimize=False`` (a
    graph that came out of the optimizer already).
    """
    from rlx_edge.quant.calibrate import _runner, iter_batches

    fg, _ = optimize_graph(float_graph, PipelineOptions(optimize=optimize))
    qmeta = quant_graph.metadata.get("quantization", {})
    vmap: dict[str, str] = dict(qmeta.get("values", {}))
    prod = {o: n for n in quant_graph.nodes for o in n.outputs}
    run_f, run_q = _runner(fg), _runner(quant_graph)
    sig: dict[str, float] = {}
    err: dict[str, float] = {}
    out_stats = {o: {"max": 0.0, "abs": 0.0, "n": 0, "agree": 0, "rows": 0} for o in fg.outputs}
    correct = {"float": 0, "quantized": 0}
    seen = 0
    for batch in iter_batches(fg, data, batch_size, max_samples):
        n = len(next(iter(batch.values())))
        qbatch = {}
        for k, v in batch.items():
            t = quant_graph.types[k]
            qbatch[k] = affine_quantize(v, t.quant, t.dtype) if (t.quant is not None and t.dtype.is_int) else v
        fvals_all = list(run_f(batch))
        qvals_all = list(run_q(qbatch))
        if len(fvals_all) != len(qvals_all):  # one graph batched, the other could not: compare per sample
            fvals_all = list(_runner(fg, batched=False)(batch))
            qvals_all = list(_runner(quant_graph, batched=False)(qbatch))
        for fvals, qvals in zip(fvals_all, qvals_all):
            for orig, qn in vmap.items():
                if orig not in fvals or qn not in qvals:
                    continue
                f = fvals[orig].astype(np.float64)
                q = _real(quant_graph, qn, qvals[qn]).reshape(f.shape)
                sig[orig] = sig.get(orig, 0.0) + float(np.sum(f * f))
                err[orig] = err.get(orig, 0.0) + float(np.sum((f - q) ** 2))
            for o, qo in zip(fg.outputs, quant_graph.outputs):
                f = fvals[o].astype(np.float64)
                q = _real(quant_graph, qo, qvals[qo]).reshape(f.shape)
                s = out_stats[o]
                d = np.abs(f - q)
                s["max"] = max(s["max"], float(d.max(initial=0.0)))
                s["abs"] += float(d.sum())
                s["n"] += d.size
                sig[f"output:{o}"] = sig.get(f"output:{o}", 0.0) + float(np.sum(f * f))
                err[f"output:{o}"] = err.get(f"output:{o}", 0.0) + float(np.sum((f - q) ** 2))
                if f.ndim and f.shape[-1] > 1:
                    fa, qa = f.reshape(-1, f.shape[-1]).argmax(1), q.reshape(-1, f.shape[-1]).argmax(1)
                    s["agree"] += int((fa == qa).sum())
                    s["rows"] += fa.size
                    if labels is not None and o == fg.outputs[0]:
                        lab = np.asarray(labels).reshape(-1)[seen : seen + fa.size]
                        correct["float"] += int((fa == lab).sum())
                        correct["quantized"] += int((qa == lab).sum())
            seen += 1 if len(fvals_all) > 1 else 0
        if len(fvals_all) == 1:
            seen += n
    layers = [
        {"value": v, "op": prod[vmap[v]].op if vmap[v] in prod else "input", "sqnr_db": _sqnr(sig[v], err[v])}
        for v in vmap
        if v in sig
    ]
    schemes = qmeta.get("layers")  # mixed precision: each quantized node's scheme
    if schemes:
        made_by = {o: n.name for n in fg.nodes for o in n.outputs}
        for row in layers:
            row["scheme"] = schemes.get(made_by.get(row["value"], ""))
    outputs = {}
    for o, s in out_stats.items():
        outputs[o] = {
            "sqnr_db": _sqnr(sig.get(f"output:{o}", 0.0), err.get(f"output:{o}", 0.0)),
            "max_abs_error": s["max"],
            "mean_abs_error": s["abs"] / max(s["n"], 1),
            "top1_agreement": s["agree"] / s["rows"] if s["rows"] else None,
        }
    rep: dict[str, Any] = {
        "graph": quant_graph.name,
        "scheme": qmeta.get("scheme"),
        "samples": seen,
        "layers": layers,
        "outputs": outputs,
        "float_nodes": qmeta.get("float_nodes", {}),
        "numerics": qmeta.get("numerics"),
    }
    if labels is not None:
        rep["accuracy"] = {k: v / seen for k, v in correct.items()} if seen else None
    return rep


def save_report(report: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a report as JSON, atomically."""
    return atomic_write_text(path, json.dumps(report, indent=1, sort_keys=True) + "\n")


def report_text(report: dict[str, Any]) -> str:
    """A readable table of a report."""
    lines = [f"quantization report: {report['graph']} ({report['scheme']}), {report['samples']} samples"]
    for row in report["layers"]:
        s = row["sqnr_db"]
        scheme = f" {row['scheme'] or '-'}" if "scheme" in row else ""
        lines.append(f"  {row['value']:<48} {row['op']:<18} {'exact' if s is None else f'{s:7.2f} dB'}{scheme}")
    for o, s in report["outputs"].items():
        agree = "-" if s["top1_agreement"] is None else f"{100 * s['top1_agreement']:.2f} %"
        lines.append(f"  output {o}: max |err| {s['max_abs_error']:.4g}, top-1 agreement {agree}")
    if report.get("accuracy"):
        a = report["accuracy"]
        lines.append(f"  accuracy: float {100 * a['float']:.2f} %, quantized {100 * a['quantized']:.2f} %")
    if report.get("numerics"):
        lines.append(f"  {numerics_text(report['numerics'])}")
        for t, c in report["numerics"]["tensors"].items():
            lines.append(f"    {t}: " + ", ".join(f"{k} {v}" for k, v in c.items() if k != "node"))
    if report.get("mixed"):
        lines.append(mixed_text(report["mixed"]))
    return "\n".join(lines)


def mixed_text(mixed: dict[str, Any]) -> str:
    """The ``mixed`` section of a report (:meth:`rlx_edge.quant.mixed.MixedResult.to_json`) as a table."""
    lines = [
        f"mixed precision: target {mixed['target_sqnr_db']:g} dB, output SQNR {mixed['output_sqnr_db']:.2f} dB "
        f"on {mixed['samples']} samples ({mixed['evaluations']} candidate graphs run)",
        f"  {'layer':<48} {'op':<17} {'scheme':<8} {'sensitivity':>11} {'flash B':>9}",
    ]
    for row in mixed["layers"]:
        s = row["sensitivity_db"]
        sens = "-" if s is None else f"{s:8.2f} dB"
        lines.append(f"  {row['node']:<48} {row['op']:<17} {row['scheme']:<8} {sens:>11} {row['flash_bytes']:>9}")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(mixed["schemes"].items()))
    uniform = ", ".join(f"all {k} {v:.2f} dB" for k, v in mixed["uniform_sqnr_db"].items())
    lines.append(
        f"  flash {mixed['flash_bytes']} B (layers {mixed['layer_flash_bytes']} B), "
        f"arena {mixed['arena_bytes']} B; {counts}; {uniform}"
    )
    return "\n".join(lines)


def numerics_text(numerics: dict[str, Any]) -> str:
    """PTQ's counts (``numerics`` of a report) in one line."""
    n = numerics
    return (
        f"PTQ numerics: {n['silent_clips']} silent clips, {n['bias_adjusted']} biases adjusted (weight scale "
        f"raised), {n['degenerate']} degenerate ranges, in {len(n['tensors'])} tensors"
    )


def worst_layers(report: dict[str, Any], k: int = 5) -> list[dict[str, Any]]:
    """The ``k`` layers with the lowest SQNR, worst first (exact layers, ``sqnr_db`` None, count as best)."""
    return sorted(report["layers"], key=lambda row: math.inf if row["sqnr_db"] is None else row["sqnr_db"])[:k]


def summary(report: dict[str, Any], k: int = 5) -> dict[str, Any]:
    """What ``rlx-edge quantize`` prints at the end: output SQNR and the ``k`` worst layers."""
    return {
        "samples": report["samples"],
        "outputs": {o: s["sqnr_db"] for o, s in report["outputs"].items()},
        "worst_layers": worst_layers(report, k),
        "numerics": _totals(report.get("numerics")),
        "mixed": report.get("mixed"),
    }


def _totals(numerics: dict[str, Any] | None) -> dict[str, int] | None:
    return None if numerics is None else {k: v for k, v in numerics.items() if k != "tensors"}


def summary_text(report: dict[str, Any], k: int = 5) -> str:
    """:func:`summary` as a few lines."""
    s = summary(report, k)
    lines = [f"output SQNR over {s['samples']} samples: " + ", ".join(f"{o} {_db(v)}" for o, v in s["outputs"].items())]
    lines.append(f"{len(s['worst_layers'])} worst layers by SQNR:")
    lines += [f"  {_db(row['sqnr_db']):>9}  {row['value']} ({row['op']})" for row in s["worst_layers"]]
    if report.get("numerics"):
        lines.append(numerics_text(report["numerics"]))
    if report.get("mixed"):
        lines.append(mixed_text(report["mixed"]))
    return "\n".join(lines)


def _db(sqnr: float | None) -> str:
    return "exact" if sqnr is None else f"{sqnr:.2f} dB"
