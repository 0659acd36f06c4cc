"""The numpy integer reference against TFLite Micro on the host, per inference, side by side in one run.

For each MLPerf Tiny int8 model: one TFLite Micro interpreter (its own
Python package, in this process, so that a call is its ``invoke`` and
nothing of our child-process plumbing) and one reference plan
(``rlx_edge.targets.reference.RunPlan``: every node prepared and bound to
its weights once). Each of ``--n`` seeded inputs runs through both, one
after the other (interleaved, so that load on the machine hits both alike),
after ``--warmup`` inferences of each; every output pair must be
``np.array_equal``. Reported: the median per-inference time of each and
their ratio (``ratio`` = reference / TFLite Micro, batch 1, as TFLite Micro
runs one inference at a time), and, as extra information, the reference's
throughput on the same inputs as one batch (``batched_per_inference_ms``: the
median of 5 runs over ``--n``, outputs checked equal to the batch-1 ones).

Usage: ``python bench/host_reference.py [--models kws,vww,ic,ad] [--n 50] [--warmup 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

# One thread, as TFLite Micro runs: set before numpy loads its BLAS. (A multi-threaded BLAS
# also loses on a busy machine: its threads wait for cores on every small product.)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from _common import MLPERF_INT8, record  # noqa: E402  (bench/ is on sys.path when run as a script)

from rlx_edge.frontends.tflite import load_tflite  # noqa: E402
from rlx_edge.frontends.tflm import default_arena_size  # noqa: E402
from rlx_edge.ir.graph import Graph  # noqa: E402
from rlx_edge.targets.reference import RunPlan  # noqa: E402
from rlx_edge.targets.reference.compare import make_inputs  # noqa: E402


def _batched(graph: Graph, n: int) -> Graph:
    """``graph`` with a leading batch axis of ``n`` on every computed value (the MLPerf models have one)."""
    g = graph.copy()
    for name, t in list(g.types.items()):
        if name not in g.params and t.rank > 0:
            if t.shape[0] != 1:
                raise ValueError(f"{graph.name}: value {name!r} has no leading batch axis of 1")
            g.types[name] = t.with_shape((n,) + tuple(t.shape[1:]))
    for node in g.nodes:
        if node.op == "reshape":
            node.attrs["shape"] = (n,) + tuple(node.attrs["shape"][1:])
    return g


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_model(key: str, n: int, warmup: int) -> dict:
    from tflite_micro import runtime

    path = MLPERF_INT8[key]
    data = path.read_bytes()
    graph = load_tflite(path)
    t0 = time.perf_counter()
    plan = RunPlan(graph)
    plan_ms = (time.perf_counter() - t0) * 1e3
    interp = runtime.Interpreter.from_bytes(data, arena_size=default_arena_size(data))
    (x_name,) = graph.inputs
    (y_name,) = graph.outputs
    xs = [np.ascontiguousarray(s[x_name]) for s in make_inputs(graph, n, seed=17, edge=False)]

    def tflm(x: np.ndarray) -> np.ndarray:
        interp.set_input(x, 0)
        interp.invoke()
        return np.array(interp.get_output(0), copy=True)

    def reference(x: np.ndarray) -> np.ndarray:
        return plan({x_name: x})[y_name]

    for i in range(warmup):
        tflm(xs[i % n])
        reference(xs[i % n])
    t_tflm, t_ref, outs = [], [], []
    mismatches = 0
    for x in xs:
        dt, want = _timed(lambda x=x: tflm(x))
        t_tflm.append(dt)
        dt, got = _timed(lambda x=x: reference(x))
        t_ref.append(dt)
        mismatches += not np.array_equal(np.asarray(got).reshape(np.shape(want)), want)
        outs.append(got)
    batch_plan = RunPlan(_batched(graph, n))
    feed = {x_name: np.concatenate(xs, axis=0)}
    batch_plan(feed)  # warm-up
    runs = [_timed(lambda: batch_plan(feed)) for _ in range(5)]
    dt_batch, batch_out = statistics.median(dt for dt, _ in runs), runs[0][1]
    batch_equal = np.array_equal(batch_out[y_name], np.concatenate(outs, axis=0))
    tflm_ms, ref_ms = statistics.median(t_tflm) * 1e3, statistics.median(t_ref) * 1e3
    return {
        "tflm_ms": round(tflm_ms, 4),
        "reference_ms": round(ref_ms, 4),
        "ratio": round(ref_ms / tflm_ms, 3),
        "bit_exact": mismatches == 0,
        "mismatches": mismatches,
        "batched_per_inference_ms": round(dt_batch * 1e3 / n, 4),
        "batched_bit_exact": bool(batch_equal),
        "plan_ms": round(plan_ms, 1),
        "nodes": len(graph.nodes),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MLPERF_INT8))
    ap.add_argument("--n", type=int, default=50, help="timed inferences per model (median reported)")
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    rows = {key: bench_model(key, args.n, args.warmup) for key in args.models.split(",")}
    for key, r in rows.items():
        print(
            f"{key}: TFLite Micro {r['tflm_ms']:.3f} ms, reference {r['reference_ms']:.3f} ms "
            f"(ratio {r['ratio']:.2f}, bit-exact {r['bit_exact']}), batched {r['batched_per_inference_ms']:.3f} ms",
            file=sys.stderr,
        )
    ok = all(r["bit_exact"] and r["batched_bit_exact"] for r in rows.values())
    record(
        "host_reference",
        {
            "n": args.n,
            "warmup": args.warmup,
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
            "numpy": np.__version__,
            "max_ratio": max(r["ratio"] for r in rows.values()),
            "all_bit_exact": ok,
            "models": rows,
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
