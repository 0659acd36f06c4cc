"""The reference target: a numpy interpreter, the oracle for every other target."""

from rlx_edge.targets.reference.interpreter import run

__all__ = ["run"]
