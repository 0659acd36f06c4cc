"""Arena sizes: our static plan against TFLite Micro's measured arena, same run.

For each int8 MLPerf Tiny model: our arena (scratch included) for each
planner target, the lower bound (most bytes live at once under our schedule),
TFLite Micro's arena measured with print_allocations, and the published
microTVM AOT workspace for the same files. One JSON line per run.
"""

from __future__ import annotations

import argparse
import sys

from _common import MLPERF_INT8, record  # bench/ is on sys.path when run as a script

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.frontends.tflm import tflm_arena_bytes
from rlx_edge.ir.plan import plan

MICROTVM_AOT = {"kws": 17232, "vww": 64800, "ic": 66112, "ad": 1160}
GOAL_VS_TFLM = {"kws": 0.70, "vww": 0.70, "ic": 0.90, "ad": 0.30}


def planners():
    """The targets whose planners can run here: (name, scratch function)."""
    yield "reference", None
    try:
        from rlx_edge.targets.cortexm import scratch_bytes  # declared by the Cortex-M rule table
    except ImportError:
        return
    yield "cortexm", scratch_bytes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=",".join(MLPERF_INT8))
    args = ap.parse_args()
    rows = {}
    ok = True
    for key in args.models.split(","):
        path = MLPERF_INT8[key]
        graph = load_tflite(path)
        tflm = tflm_arena_bytes(path)
        row = {"tflm_arena_bytes": tflm, "microtvm_aot_bytes": MICROTVM_AOT[key]}
        for target, scratch in planners():
            p = plan(graph, target=target, scratch=scratch)
            row[target] = {
                "arena_bytes": p.arena_bytes,
                "lower_bound_bytes": p.lower_bound_bytes,
                "scratch_bytes": p.scratch_bytes,
                "algorithm": p.algorithm,
                "ratio_vs_tflm": round(p.arena_bytes / tflm, 4),
                "meets_goal": p.arena_bytes <= GOAL_VS_TFLM[key] * tflm and p.arena_bytes <= MICROTVM_AOT[key],
            }
            ok &= row[target]["meets_goal"]
        rows[key] = row
    record("arena", {"models": rows, "all_goals_met": ok})
    return 0


if __name__ == "__main__":
    sys.exit(main())
