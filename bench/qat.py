"""Benchmark: quantization-aware training vs post-training quantization on the bundled digits CNN.

The float model (``rlx_edge/models/digits_cnn.rlx``) was trained on the
seeded 80 % train split of scikit-learn's digits; everything here uses that
same split: PTQ calibrates on it, QAT calibrates on it and fine-tunes on it.
Reported: held-out accuracy (the 20 % test split, 359 images) of float, PTQ
int8, QAT int8, PTQ int4w and QAT int4w, the share of the int4w PTQ gap that
QAT recovers, whether PTQ of the trained weights gave the integers training
rounded to, and wall time per QAT run (calibration, graph building, jit,
training and the final PTQ) with the jax device it trained on. QAT runs once
per seed and scheme: the int4w gap is three test images, so one seed's figure
alone says little. Accuracy of
every model is measured with the same jax-traced evaluation
(:func:`rlx_edge.quant.qat.accuracy`; the integer graphs are bit-exact with
the reference interpreter, which tests check).

    .venv/bin/python bench/qat.py [--epochs N] [--lr X] [--batch B] [--device cpu|gpu] [--seeds 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import record

from rlx_edge.models.digits import build_digits_cnn, digits_data
from rlx_edge.pipeline import optimize_graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.quant.qat import accuracy, qat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds: one QAT run per seed and scheme")
    args = ap.parse_args(argv)

    import jax

    seeds = [int(s) for s in args.seeds.split(",")]
    xtr, ytr = digits_data("train")
    xte, yte = digits_data("test")
    g, _ = optimize_graph(build_digits_cnn())
    test = {g.inputs[0]: xte.reshape(len(xte), *g.types[g.inputs[0]].shape)}
    rec = calibrate(g, xtr, optimize=False)
    acc = {"float": accuracy(g, test, yte, args.device)}
    for scheme in ("int8", "int4w"):
        acc[f"ptq_{scheme}"] = accuracy(quantize(g, rec, scheme=scheme, optimize=False), test, yte, args.device)
    gap = acc["float"] - acc["ptq_int4w"]
    runs = []
    for seed in seeds:
        run: dict = {"seed": seed}
        for scheme in ("int8", "int4w"):
            t0 = time.perf_counter()
            res = qat(
                g, xtr, ytr, scheme=scheme, epochs=args.epochs, lr=args.lr, batch=args.batch, device=args.device,
                seed=seed, progress=False, optimize=False,
            )  # fmt: skip
            run[scheme] = {
                "accuracy": round(accuracy(res.graph, test, yte, args.device), 5),
                "seconds": round(time.perf_counter() - t0, 2),
                "loss_before": round(res.loss_before, 5),
                "loss_after": round(res.loss_after, 5),
                "weights_exact": res.weights_exact,
            }
        run["int4w_gap_recovered"] = round((run["int4w"]["accuracy"] - acc["ptq_int4w"]) / gap, 3) if gap > 0 else None
        runs.append(run)
    recovered = [r["int4w_gap_recovered"] for r in runs if r["int4w_gap_recovered"] is not None]
    record(
        "qat",
        {
            "model": "digits_cnn",
            "train_samples": len(ytr),
            "test_samples": len(yte),
            "epochs": args.epochs,
            "lr": args.lr,
            "batch": args.batch,
            "device": args.device,
            "jax_device": str(jax.devices(args.device)[0]),
            "accuracy": {k: round(v, 5) for k, v in acc.items()},
            "runs": runs,
            "int4w_gap_recovered_min": min(recovered) if recovered else None,
            "qat_int8_ge_ptq_int8": all(r["int8"]["accuracy"] >= round(acc["ptq_int8"], 5) for r in runs),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
