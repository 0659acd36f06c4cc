"""The reference target's interpreter is the IR's own: :mod:`rlx_edge.ir.interpret`.

It lives in ``ir`` so that calibration (``rlx_edge.quant``) can run graphs
without importing a target; these names stay here for existing callers.
"""

from rlx_edge.ir.interpret import RunPlan, bind_inputs, run, run_node

__all__ = ["RunPlan", "bind_inputs", "run", "run_node"]
