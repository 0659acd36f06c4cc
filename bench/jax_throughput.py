"""Int8 inference throughput of the jax target beside the numpy reference and TFLite Micro, same run.

For each int8 MLPerf Tiny model: inferences per second of the jitted jax
function on the chosen device at batch 1, 256 and 4096 (warm: compiled and
run once first; inputs already on the device; ``block_until_ready``; best
of several repeats), the numpy reference on the host (one sample at a time,
as its batch-1 graphs require; at most 256 samples to bound the time) and
TFLite Micro's interpreter on the host (one by one). Jax outputs on the
timed inputs are checked bit for bit against the reference. One JSON line
per model, appended to bench/results/jax_throughput.jsonl.

    python bench/jax_throughput.py --device gpu
    python bench/jax_throughput.py --device cpu --models kws --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout, when rlx_edge is not installed

from _common import MLPERF_INT8, record

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.reference import run as reference_run


def _best_rate(fn, batch: int, repeats: int, min_seconds: float) -> tuple[float, list[float]]:
    """Inferences per second of the best repeat; a repeat loops ``fn`` for at least ``min_seconds``."""
    times = []
    for _ in range(repeats):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        times.append(elapsed / calls)
    return batch / min(times), [round(t * 1e3, 4) for t in times]


def bench_jax(graph, x: np.ndarray, device: str, batches: list[int], repeats: int, min_seconds: float, mode: str):
    from rlx_edge.targets.jax import compile_jax

    model = compile_jax(graph, device, int_matmul=mode)
    rows = {}
    for b in batches:
        reps = -(-b // len(x))
        xb = np.concatenate([x] * reps)[:b]
        arrays, _, vmapped = model.prepare(xb)
        dev = model.put(arrays)
        t0 = time.perf_counter()
        out = model.run_device(dev, vmapped)
        out[0].block_until_ready()
        compile_s = time.perf_counter() - t0
        rate, ms = _best_rate(
            lambda d=dev, v=vmapped: model.run_device(d, v)[0].block_until_ready(), b, repeats, min_seconds
        )
        rows[str(b)] = {"inferences_per_s": round(rate, 1), "ms_per_batch": ms, "first_call_s": round(compile_s, 3)}
    first = model(x)[graph.outputs[0]]
    return model, rows, first


def bench_reference(graph, x: np.ndarray) -> tuple[float, np.ndarray]:
    outs = []
    start = time.perf_counter()
    for i in range(len(x)):
        outs.append(reference_run(graph, x[i : i + 1])[graph.outputs[0]])
    return len(x) / (time.perf_counter() - start), np.concatenate(outs)


def bench_tflm(path: Path, x: np.ndarray) -> dict:
    try:
        from rlx_edge.frontends.tflm import TflmModel

        m = TflmModel(path)
        m(x[:1])  # warm
        outs = []
        start = time.perf_counter()
        for i in range(len(x)):
            outs.append(m(x[i : i + 1])[0])
        rate = len(x) / (time.perf_counter() - start)
        return {"inferences_per_s": round(rate, 1), "samples": len(x), "outputs": np.concatenate(outs)}
    except Exception as e:  # TFLite Micro is optional on accelerator hosts
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu, gpu, tpu or gpu:INDEX")
    ap.add_argument("--models", default=",".join(MLPERF_INT8), help=f"comma list of {','.join(MLPERF_INT8)}")
    ap.add_argument("--batches", default="1,256,4096")
    ap.add_argument("--int-matmul", default="auto", help="auto, f32, i32 or i8 (all exact)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats and samples (a smoke run)")
    ap.add_argument("--no-record", action="store_true", help="print, but do not append to the results file")
    args = ap.parse_args()

    import jax

    from rlx_edge.targets.jax import resolve_devices

    device = resolve_devices(args.device)[0]
    device_name = f"{device.platform}:{device.id} {getattr(device, 'device_kind', '')}".strip()
    print(f"jax {jax.__version__} device: {device_name}", file=sys.stderr)
    batches = [int(b) for b in args.batches.split(",")]
    repeats, min_seconds = (2, 0.05) if args.quick else (5, 0.5)
    ref_samples = 16 if args.quick else 256
    tflm_samples = 32 if args.quick else 256
    all_exact = True
    for key in args.models.split(","):
        path = MLPERF_INT8[key]
        graph = load_tflite(path)
        t = graph.types[graph.inputs[0]]
        shape = tuple(int(d) for d in t.shape[1:])
        x = np.random.default_rng(0).integers(-128, 128, (max(ref_samples, tflm_samples), *shape)).astype(np.int8)
        model, rows, first = bench_jax(
            graph, x[:ref_samples], args.device, batches, repeats, min_seconds, args.int_matmul
        )
        ref_rate, ref_out = bench_reference(graph, x[:ref_samples])
        exact = bool(np.array_equal(first, ref_out))
        all_exact &= exact
        tflm = bench_tflm(path, x[:tflm_samples])
        tflm_out = tflm.pop("outputs", None)
        if tflm_out is not None:
            tflm["bit_exact_vs_reference"] = bool(np.array_equal(tflm_out[: len(ref_out)], ref_out))
        best = max(r["inferences_per_s"] for r in rows.values())
        payload = {
            "model": key,
            "file": path.name,
            "device": device_name,
            "jax": jax.__version__,
            "int_matmul": args.int_matmul,
            "int_matmul_layers": sorted({n["int_matmul"] for n in model.notes.values() if "int_matmul" in n}),
            "jax_batches": rows,
            "jax_best_inferences_per_s": best,
            "reference": {"inferences_per_s": round(ref_rate, 1), "samples": ref_samples, "host": True},
            "tflm": tflm,
            "speedup_vs_reference": round(best / ref_rate, 1),
            "speedup_vs_tflm": round(best / tflm["inferences_per_s"], 1) if "inferences_per_s" in tflm else None,
            "bit_exact_vs_reference": exact,
            "quick": args.quick,
        }
        if args.no_record:
            import json

            print(json.dumps(payload, sort_keys=True))
        else:
            record("jax_throughput", payload)
    return 0 if all_exact else 1


if __name__ == "__main__":
    sys.exit(main())
