"""Graph passes: named, pure rewrites run by a :class:`PassManager` (see ``manager``).

Importing this package registers every pass of the default pipeline.
"""

from rlx_edge.ir.passes import algebraic, bn_fold, cse, dce, fold, fuse, pad_fold  # noqa: F401  (registration)
from rlx_edge.ir.passes.legalize import legalize
from rlx_edge.ir.passes.manager import (
    DEFAULT_PIPELINE,
    PASSES,
    Event,
    Pass,
    PassContext,
    PassManager,
    PassReport,
    get_pass,
    optimize,
    register,
)

__all__ = [
    "DEFAULT_PIPELINE",
    "PASSES",
    "Event",
    "Pass",
    "PassContext",
    "PassManager",
    "PassReport",
    "get_pass",
    "legalize",
    "optimize",
    "register",
]
