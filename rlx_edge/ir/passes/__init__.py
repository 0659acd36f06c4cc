"""Graph passes: named, pure rewrites run by a :class:`PassManager` (see ``manager``).

Importing this package registers every pass: each module of the package
registers its own with ``@register``, and none is listed here. ``reinfer``
and ``rename_value`` are the graph edits the quantizer shares with the passes.
"""

import importlib
import pkgutil

from rlx_edge.ir.passes._rewrite import reinfer, rename_value
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

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_mod}")

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
    "reinfer",
    "rename_value",
]
