"""The reference target: the numpy interpreter (:mod:`rlx_edge.ir.interpret`), the oracle for every other target."""

from rlx_edge.ir.interpret import RunPlan, run

__all__ = ["RunPlan", "run"]
